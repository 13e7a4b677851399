"""Prometheus alerting rules from the knee: warning past the watermark, critical at the knee.

Rules (one group, ``loadknee-<run id>``), each with its evidence in its annotations and in a
comment above it:

* **LLMServerPastWatermark** (warning) — the per-replica running batch, averaged over
  ``window``, above the midpoint between the watermark stage's mean and the next tested stage's:
  the load is beyond what one replica should carry;
* **LLMServerAtKnee** (critical) — the per-replica waiting queue above the midpoint between the
  stage before the knee and the knee's stage: requests queue as they did at the knee;
* **LLMLatencyPastWatermark** / **LLMLatencyAtKnee** — the engine's e2e latency histogram P95
  over ``window``: warning above the midpoint between the watermark stage's measured P95 and the
  next stage's, critical above the midpoint between the stage before the knee and the knee's
  (each written as a multiple of the baseline's P95), rounded up to the histogram's next bucket
  bound: ``histogram_quantile`` interpolates inside a bucket, so a limit inside one fires on
  loads whose P95 never reached it. llama.cpp exports no latency histogram: left out, with why.

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
from analysis.cluster.plan import AlertParams
from analysis.cluster.stages import StageGauges, anchors, stage_gauges
from analysis.cluster.yamlblock import Commented, dump
from analysis.pipeline import Analysis
from analysis.report.answer_view import answer_note
from analysis.report.stage_words import provisional_text
from loadknee_core.numeric import counted


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
    bounds = bucket_bounds(analysis, f"{engine.latency_histogram}_bucket")
    gauges = stage_gauges(analysis)
    steps = _steps(analysis, gauges)
    rules: list[Rule] = []
    missing: list[str] = []
    pairs = (
        ("LLMLatencyPastWatermark", "warning", marks.watermark, 1, "the watermark stage"),
        ("LLMLatencyAtKnee", "critical", marks.knee, -1, f"the {marks.knee_kind or 'knee'}"),
    )
    for alert, severity, anchor, offset, word in pairs:
        other = _neighbour(steps, anchor, offset) if anchor is not None else None
        if anchor is None or other is None:
            missing.append(f"{alert}: no stage {'after' if offset > 0 else 'before'} {word}")
            continue
        low, high = sorted((anchor, other), key=lambda g: g.users)
        if (
            not (_known(low.e2e_p95_ms) and _known(high.e2e_p95_ms))
            or high.e2e_p95_ms <= low.e2e_p95_ms
        ):
            missing.append(
                f"{alert}: the e2e P95 did not grow from {low.users} to {high.users} users"
            )
            continue
        mid_s = (low.e2e_p95_ms + high.e2e_p95_ms) / 2000
        limit_s = next((b for b in bounds if b >= mid_s), None) if bounds else mid_s
        if limit_s is None:
            missing.append(f"{alert}: {mid_s:.3g} s lies past the histogram's last bucket")
            continue
        rounded = (
            f"; rounded up to the histogram's bucket bound {_num(limit_s)} s (a quantile of "
            "a histogram reads no finer)"
            if limit_s != mid_s
            else ""
        )
        rules.append(
            Rule(
                alert,
                severity,
                f"{p95} > {_num(limit_s)}",
                f"request latency P95 past {word}'s",
                f"e2e P95 {low.e2e_p95_ms:.0f} ms at {counted(low.users, 'user')} "
                f"({low.e2e_p95_ms / base:.2f}× the baseline's {base:.0f} ms), "
                f"{high.e2e_p95_ms:.0f} ms at {high.users} ({high.e2e_p95_ms / base:.2f}×): "
                f"above the midpoint, {mid_s * 1000:.0f} ms{rounded}",
            )
        )
    return rules, missing


def bucket_bounds(analysis: Analysis, bucket_metric: str) -> list[float]:
    """The finite ``le`` bounds (s) of a histogram the run scraped, ascending; [] if none."""
    metrics = analysis.run.server_metrics
    if metrics.empty:
        return []
    labels = metrics.loc[metrics["metric"].astype(str) == bucket_metric, "labels"].dropna()
    bounds = set()
    for text in labels.astype(str).unique():
        start = text.find('le="')
        if start >= 0:
            value = text[start + 4 : text.find('"', start + 4)]
            try:
                bound = float(value)
            except ValueError:
                continue
            if math.isfinite(bound):
                bounds.add(bound)
    return sorted(bounds)


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
        answer_note(anchors(analysis).view),
        *(f"Left out: {m}." for m in missing + missing_latency),
    ]
    basis = anchors(analysis).watermark_basis
    if basis != "production_watermark":
        header.append(f"Watermark: {basis}.")
    if analysis.recommendations.provisional:
        header.append("PROVISIONAL: " + provisional_text(analysis.recommendations.provisional))
    doc = {"groups": [{"name": f"loadknee-{analysis.run_id}", "rules": rules}]}
    return dump(doc, header=header)
