"""Prometheus alerting rules from the knee: warning past the watermark, critical at the knee.

Rules (one group, ``loadknee-<run id>``), each with its evidence in its annotations and in a
comment above it:

* **LLMServerPastWatermark** (warning) — the per-replica running batch, averaged over
  ``window``, above the midpoint between the watermark stage's mean and the next tested stage's:
  the load is beyond what one replica should carry;
* **LLMServerAtKnee** (critical) — the per-replica waiting queue above the midpoint between the
  stage before the knee and the knee's stage: requests queue as they did at the knee;
* **LLMLatencyPastWatermark** / **LLMLatencyAtKnee** — the engine's e2e latency histogram P95
  over ``window`` against the baseline: warning above the watermark stage's measured P95
  (written as a multiple of the baseline's), critical above the knee rule's own limit, the
  baseline's P95 × ``tail_ratio``. llama.cpp exports no latency histogram: left out, with why.

Midpoints, not the stages' own means, so that a rule fires in the stage past its anchor and not
in the anchor stage itself, whose samples straddle its mean. Without server metrics the same two
load rules stand on the gateway's in-flight requests (a placeholder the gateway must export).
A rule whose evidence is missing (no knee, no queue at the knee) is left out, and the header
says which and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from analysis.cluster.autoscale import GATEWAY_METRIC, _num
from analysis.cluster.engines import detect_engine, served_model
from analysis.cluster.stages import StageGauges, anchors, stage_gauges
from analysis.cluster.yamlblock import Commented, dump
from analysis.numeric import counted
from analysis.pipeline import Analysis


@dataclass(frozen=True)
class AlertParams:
    """How the rules average and wait (Prometheus durations)."""

    window: str = "1m"  # averaging window of the gauges and of the latency rate
    hold: str = "2m"  # the rules' ``for:``
    quantile: float = 0.95


@dataclass(frozen=True)
class Rule:
    alert: str
    severity: str  # warning | critical
    expr: str
    summary: str
    evidence: str


def _known(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def _steps(analysis: Analysis, gauges: dict[int, StageGauges]) -> list[StageGauges]:
    judged = {v.stage for v in analysis.knee.stages if v.verdict != "insufficient_data"}
    return sorted((g for s, g in gauges.items() if s in judged), key=lambda g: (g.users, g.stage))


def _neighbour(steps: list[StageGauges], stage: StageGauges, offset: int) -> StageGauges | None:
    index = next((i for i, g in enumerate(steps) if g.stage == stage.stage), None)
    if index is None or not 0 <= index + offset < len(steps):
        return None
    return steps[index + offset]


def _per_replica(metric: str, selector: str, window: str) -> str:
    return f"avg(avg_over_time({metric}{selector}[{window}]))"


def load_rules(analysis: Analysis, params: AlertParams) -> tuple[list[Rule], list[str]]:
    """The running-batch and queue rules (or their gateway stand-ins), and what was left out."""
    gauges = stage_gauges(analysis)
    steps = _steps(analysis, gauges)
    marks = anchors(analysis)
    engine = detect_engine(analysis.run.server_metrics)
    model = served_model(analysis.run.server_metrics, engine) if engine else None
    selector = (
        f'{{{engine.model_label}="{model}"}}' if engine and engine.model_label and model else ""
    )
    rules: list[Rule] = []
    missing: list[str] = []
    wm, knee = marks.watermark, marks.knee
    server = engine is not None and wm is not None and _known(wm.running_mean)
    running = engine.running if server and engine else GATEWAY_METRIC
    where = f"{engine.label} " if server and engine else "the gateway's "
    value = (lambda g: g.running_mean) if server else (lambda g: float(g.users))
    after = _neighbour(steps, wm, 1) if wm else None
    if wm is not None and after is not None and value(after) > value(wm):
        limit = (value(wm) + value(after)) / 2
        gauge = _per_replica(running, selector if server else "", params.window)
        rules.append(
            Rule(
                "LLMServerPastWatermark",
                "warning",
                f"{gauge} > {_num(limit)}",
                f"{where}running requests per replica above the production watermark",
                f"at the watermark stage, {counted(wm.users, 'user')}, {value(wm):.1f} ran on "
                f"average; at the next stage, {counted(after.users, 'user')}, {value(after):.1f}: "
                f"warn above the midpoint, {_num(limit)}",
            )
        )
    else:
        missing.append("the watermark warning: no tested stage above the watermark's to bound it")
    before = _neighbour(steps, knee, -1) if knee else None
    if server and engine and knee is not None and before is not None:
        if _known(knee.waiting_mean) and knee.waiting_mean > before.waiting_mean:
            limit = (before.waiting_mean + knee.waiting_mean) / 2
            rules.append(
                Rule(
                    "LLMServerAtKnee",
                    "critical",
                    f"{_per_replica(engine.waiting, selector, params.window)} > {_num(limit)}",
                    f"{engine.label} requests queue per replica as they did at the knee",
                    f"at the stage before the {marks.knee_kind}, {counted(before.users, 'user')}, "
                    f"{before.waiting_mean:.1f} waited on average; at the {marks.knee_kind}, "
                    f"{counted(knee.users, 'user')}, {knee.waiting_mean:.1f}: critical above the "
                    f"midpoint, {_num(limit)}",
                )
            )
        else:
            missing.append("the knee's queue rule: the server queued no more at the knee")
    elif not server and knee is not None and before is not None:
        limit = (before.users + knee.users) / 2
        rules.append(
            Rule(
                "LLMServerAtKnee",
                "critical",
                f"{_per_replica(GATEWAY_METRIC, '', params.window)} > {_num(limit)}",
                "the gateway's in-flight requests per replica reach the knee's concurrency",
                f"no server metrics: the knee was at {counted(knee.users, 'user')}, the stage "
                f"before at {before.users}; critical above the midpoint, {_num(limit)} in flight "
                f"per replica (the gateway must export {GATEWAY_METRIC}, a placeholder name)",
            )
        )
    else:
        missing.append("the knee rule: no knee or red line within the tested range")
    return rules, missing


def latency_rules(analysis: Analysis, params: AlertParams) -> tuple[list[Rule], list[str]]:
    """P95 latency from the engine's histogram against the baseline's P95."""
    engine = detect_engine(analysis.run.server_metrics)
    marks = anchors(analysis)
    base = marks.baseline_e2e_p95_ms
    if engine is None or engine.latency_histogram is None:
        who = engine.label if engine else "the server"
        return [], [f"the latency rules: {who} exports no request-latency histogram"]
    if not _known(base) or base is None or base <= 0:
        return [], ["the latency rules: no baseline P95 to compare with"]
    model = served_model(analysis.run.server_metrics, engine)
    selector = f'{{{engine.model_label}="{model}"}}' if engine.model_label and model else ""
    p95 = (
        f"histogram_quantile({params.quantile}, sum by (le) "
        f"(rate({engine.latency_histogram}_bucket{selector}[{params.window}])))"
    )
    rules: list[Rule] = []
    missing: list[str] = []
    wm = marks.watermark
    if wm is not None and _known(wm.e2e_p95_ms):
        limit_s = wm.e2e_p95_ms / 1000
        rules.append(
            Rule(
                "LLMLatencyPastWatermark",
                "warning",
                f"{p95} > {_num(limit_s)}",
                "request latency P95 above the production watermark's",
                f"at the watermark stage, {counted(wm.users, 'user')}, the e2e P95 was "
                f"{wm.e2e_p95_ms:.0f} ms, {wm.e2e_p95_ms / base:.2f}× the baseline's {base:.0f} ms",
            )
        )
    ratio = float(analysis.knee.params.get("tail_ratio") or 2.0)
    limit_s = base * ratio / 1000
    rules.append(
        Rule(
            "LLMLatencyAtKnee",
            "critical",
            f"{p95} > {_num(limit_s)}",
            "request latency P95 past the knee rule's limit",
            f"the knee rule calls the tail departed at {ratio:g}× the baseline's P95 "
            f"({base:.0f} ms): {base * ratio:.0f} ms",
        )
    )
    return rules, missing


def rules_yaml(analysis: Analysis, params: AlertParams | None = None) -> str:
    """The rule file (``groups:``), ready for ``promtool check rules``."""
    p = params or AlertParams()
    load, missing = load_rules(analysis, p)
    latency, missing_latency = latency_rules(analysis, p)
    rules: list[Any] = []
    for rule in load + latency:
        rules.append(
            Commented(
                {
                    "alert": rule.alert,
                    "expr": rule.expr,
                    "for": p.hold,
                    "labels": {"severity": rule.severity},
                    "annotations": {"summary": rule.summary, "evidence": rule.evidence},
                },
                (rule.evidence,),
            )
        )
    header = [
        f"loadknee alerting rules for run {analysis.run_id}: warning past the production "
        "watermark, critical at the knee; each rule's threshold comes from the measured stages.",
        *(f"Left out: {m}." for m in missing + missing_latency),
    ]
    basis = anchors(analysis).watermark_basis
    if basis != "production_watermark":
        header.append(f"Watermark: {basis}.")
    if analysis.recommendations.provisional:
        header.append("PROVISIONAL: " + analysis.recommendations.provisional)
    doc = {"groups": [{"name": f"loadknee-{analysis.run_id}", "rules": rules}]}
    return dump(doc, header=header)
