"""Judge every stage against the SLOs: goodput, % good, what breaks, and the SLO capacity.

Algorithm (pure; inputs are the record table, the measured raw rows and the knee):

1. Per judged stage (grid or refine), each percentile SLO is read from the stage's served
   (``ok``) measured requests, exactly and with linear interpolation like the record table;
   when no raw rows are given (a record table typed in by hand) the record table's own column
   is used (``e2e_p99_ms`` …).
   A value over its limit breaks the SLO "by" ``value / limit - 1``.
2. Goodput, with ``--goodput`` thresholds: a measured request is good when it was served and meets
   every threshold (a missing value, e.g. no TTFT for a non-streamed request, never proves it
   met one). Length mismatches are left out as in the record table; failures count as not good.
   ``good_pct`` = good / (served + failed) × 100; ``goodput_rps`` and ``good_output_tok_s`` divide
   the good requests and their completion tokens by the measured window (requests that started
   in it). A stage under ``goodput_min_pct`` breaks the goodput target.
3. A red-line stage (errors or OOM past the knee's limit) never meets the SLOs.
4. **SLO capacity**: the highest concurrency of the unbroken run of stages, from the lowest, that
   meet every SLO: a passing stage above a failing one is noise, not capacity.
5. **Binding constraint**: ``latency`` when the SLO capacity is at or below the knee's
   ``max_concurrency`` (the SLOs allow no more users than the knee does; fewer users per replica,
   more replicas), else ``throughput`` (the knee binds first; the SLOs have headroom there).
6. **Doubt**: the capacity rests on two stages, the last that passes and the first that breaks.
   When either is one the knee marked too noisy or short to judge (or client-bound), or a stage
   above the first break passes again, the summary says so and how the figure may move: a P95
   from a few dozen requests moves with one slow request, and the user must not plan on it
   without rerunning longer stages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from analysis.model import KneeResult
from analysis.numeric import NA, counted, num, sig4
from analysis.slo.targets import METRIC_COLUMNS, Slo, SloParams
from analysis.stages.levels import level_rows

Binding = Literal["latency", "throughput", "none"]


@dataclass(frozen=True)
class SloCheck:
    """One SLO on one stage: the measured value, the limit, and by how much it was missed."""

    key: str  # e.g. ttft_p95_ms
    text: str  # e.g. "TTFT P95 ≤ 500 ms"
    value: float | None
    limit: float
    met: bool
    over_pct: float | None  # (value / limit - 1) × 100 when broken


@dataclass(frozen=True)
class StageSlo:
    """A stage judged against the SLOs."""

    stage: int
    target_users: int
    met: bool
    checks: tuple[SloCheck, ...]
    breaks: tuple[str, ...]  # what failed, in words with the numbers
    good_requests: int | None  # None when no --goodput thresholds were given
    judged_requests: int | None
    good_pct: float | None
    goodput_rps: float | None
    good_output_tok_s: float | None


@dataclass(frozen=True)
class SloResult:
    """The SLO verdict of a run: the limits used, each stage, the capacity and what binds."""

    limits: str
    sources: tuple[str, ...]
    stages: tuple[StageSlo, ...]
    capacity: int | None  # highest concurrency meeting every SLO (None: no stage did)
    max_concurrency: int | None  # the knee's, for the comparison
    binding: Binding
    summary: str
    doubt: str = ""  # why the capacity may be off (noisy stages around it); "" when none


_SUMMARY_FALLBACK = {
    "e2e_p50_ms": "e2e_p50_ms", "e2e_p95_ms": "e2e_p95_ms", "e2e_p99_ms": "e2e_p99_ms",
    "ttft_p50_ms": "ttft_p50_ms", "ttft_p95_ms": "ttft_p95_ms", "ttft_p99_ms": "ttft_p99_ms",
    "tpot_p50_ms": "tpot_p50_ms", "tpot_p95_ms": "tpot_p95_ms", "itl_p95_ms": "itl_p95_ms",
    "s_per_1k_p50": "s_per_1k_total_tokens", "s_per_1k_p95": "s_per_1k_total_p95",
    "s_per_1k_p99": "s_per_1k_total_p99",
}  # fmt: skip


def request_values(rows: pd.DataFrame, metric: str) -> pd.Series:
    """The per-request value of ``metric`` (``s_per_1k`` derived from e2e and tokens)."""
    if metric == "s_per_1k":
        tokens = rows["prompt_tokens"] + rows["completion_tokens"]
        return rows["e2e_ms"] / tokens.where(tokens > 0)
    return pd.to_numeric(rows[METRIC_COLUMNS[metric]], errors="coerce")


def _percentile(slo: Slo, ok_rows: pd.DataFrame | None, row: pd.Series) -> float | None:
    if ok_rows is None:
        column = _SUMMARY_FALLBACK.get(slo.key)
        return num(row.get(column)) if column else None
    values = request_values(ok_rows, slo.metric).dropna()
    return float(np.quantile(values.to_numpy(), slo.percentile / 100)) if len(values) else None


def _check(slo: Slo, value: float | None) -> SloCheck:
    met = value is not None and value <= slo.limit
    over = None if met or value is None else (value / slo.limit - 1) * 100
    return SloCheck(slo.key, slo.text(), value, slo.limit, met, over)


def _break_text(check: SloCheck) -> str:
    unit = "s" if check.key.startswith("s_per_1k") else "ms"
    if check.value is None:
        return f"{check.text}: not measured in this stage"
    over = check.over_pct or 0.0
    by = f"{over:.1f}" if over < 10 else f"{over:.0f}"  # "+0 %" would read as not broken
    name = check.text.split(" ≤ ")[0]
    return f"{name} {sig4(check.value)} {unit} > {check.limit:g} {unit} (+{by} %)"


def _goodput(
    rows: pd.DataFrame, params: SloParams, window_s: float | None
) -> dict[str, float | None]:
    judged = rows[rows["cls"].isin(("ok", "error"))]
    good = judged["cls"] == "ok"
    for threshold in params.goodput:
        good &= request_values(judged, threshold.metric) <= threshold.limit  # NaN → not good
    count = int(good.sum())
    seconds = window_s if window_s and window_s > 0 else None
    tokens = float(judged.loc[good, "completion_tokens"].sum())
    return {
        "good_requests": count,
        "judged_requests": len(judged),
        "good_pct": count / len(judged) * 100 if len(judged) else None,
        "goodput_rps": count / seconds if seconds else None,
        "good_output_tok_s": tokens / seconds if seconds else None,
    }


def evaluate_stage(
    row: pd.Series, rows: pd.DataFrame | None, params: SloParams, *, red_line: bool
) -> StageSlo:
    """One judged stage against every SLO (``rows``: its measured raw rows with ``cls``)."""
    ok_rows = None if rows is None else rows[rows["cls"] == "ok"]
    checks = tuple(_check(slo, _percentile(slo, ok_rows, row)) for slo in params.slos)
    breaks = [_break_text(c) for c in checks if not c.met]
    good: dict[str, float | None] = dict.fromkeys(
        ("good_requests", "judged_requests", "good_pct", "goodput_rps", "good_output_tok_s")
    )
    if params.goodput and rows is not None:
        good = _goodput(rows, params, num(row.get("window_s")))
        pct = good["good_pct"]
        if pct is None or pct < params.goodput_min_pct:
            shown = NA if pct is None else f"{pct:.1f} %"
            breaks.append(f"good requests {shown} < {params.goodput_min_pct:g} %")
    elif params.goodput:
        breaks.append("goodput needs the raw requests (requests.csv)")
    if red_line:
        breaks.append("red line: requests failed or the server ran out of memory")
    return StageSlo(
        stage=int(row["stage"]),
        target_users=int(row["target_users"]),
        met=not breaks,
        checks=checks,
        breaks=tuple(breaks),
        good_requests=None if good["good_requests"] is None else int(good["good_requests"]),
        judged_requests=None if good["judged_requests"] is None else int(good["judged_requests"]),
        good_pct=good["good_pct"],
        goodput_rps=good["goodput_rps"],
        good_output_tok_s=good["good_output_tok_s"],
    )


def slo_capacity(stages: tuple[StageSlo, ...]) -> int | None:
    """Users of the last stage in the unbroken run of passing stages from the lowest."""
    capacity = None
    for stage in sorted(stages, key=lambda s: s.target_users):
        if not stage.met:
            break
        capacity = stage.target_users
    return capacity


def binding_constraint(capacity: int | None, max_concurrency: int | None) -> Binding:
    """``latency`` when the SLOs allow no more users than the knee (or none at all), else
    ``throughput``; ``none`` when there is no knee figure to compare with."""
    if capacity is None:
        return "latency"
    if max_concurrency is None:
        return "none"
    return "latency" if capacity <= max_concurrency else "throughput"


def capacity_doubt(stages: tuple[StageSlo, ...], knee: KneeResult) -> str:
    """Why the SLO capacity may be off, in words; "" when the stages around it can be trusted.

    The two stages that decide the capacity are the last passing one (its pass may be luck) and
    the first breaking one (its break may be one slow request); a stage above the break that
    passes again says the break may be noise.
    """
    ordered = sorted(stages, key=lambda s: s.target_users)
    doubtful = {v.stage for v in knee.stages if v.noisy or not v.trusted}
    red = {v.stage for v in knee.stages if v.verdict == "red_line"}  # broken for sure
    first_bad = next((i for i, s in enumerate(ordered) if not s.met), None)
    if first_bad is None:
        last_good = ordered[-1] if ordered else None
    else:
        last_good = ordered[first_bad - 1] if first_bad > 0 else None
    parts = []
    if first_bad is not None:
        broken = ordered[first_bad]
        if broken.stage in doubtful and broken.stage not in red:
            parts.append(
                f"the {broken.target_users}-user stage that breaks it is too noisy "
                "or short to judge, so the capacity may be higher"
            )
        again = [s.target_users for s in ordered[first_bad + 1 :] if s.met]
        if again:
            parts.append(
                f"{', '.join(map(str, again))} users met every SLO again above the break, "
                "so it may be noise"
            )
    if last_good is not None and last_good.stage in doubtful:
        parts.append(
            f"the {last_good.target_users}-user stage that sets it is too noisy or "
            "short to judge, so the capacity may be lower"
        )
    if not parts:
        return ""
    return (
        "Uncertain: " + "; ".join(parts) + ". Rerun with longer stages (--stage-requests or "
        "--stage-seconds) before planning on it."
    )


def _summary(stages: tuple[StageSlo, ...], capacity: int | None, knee: KneeResult,
             binding: Binding) -> str:  # fmt: skip
    first_bad = next((s for s in sorted(stages, key=lambda s: s.target_users) if not s.met), None)
    why = (
        f" {counted(first_bad.target_users, 'user')} breaks: {'; '.join(first_bad.breaks)}."
        if first_bad is not None
        else ""
    )
    conc = knee.max_concurrency
    if capacity is None:
        return "SLO capacity: none, no tested stage meets the SLOs (latency-bound)." + why
    head = f"SLO capacity {counted(capacity, 'user')}; the knee's max_concurrency {conc}."
    if binding == "latency":
        return (
            head + " Latency-bound: the SLOs allow no more users than the knee, so plan fewer "
            "users per replica and more replicas for the same peak." + why
        )
    if binding == "throughput":
        return (
            head + " Throughput-bound: the knee binds first and the SLOs have headroom at "
            "max_concurrency." + why
        )
    return head + why


def evaluate_slos(
    summary: pd.DataFrame,
    knee: KneeResult,
    *,
    params: SloParams,
    measured: pd.DataFrame | None = None,
) -> SloResult | None:
    """Every judged stage (grid and refine) against ``params`` (None when no SLO was given).

    ``measured`` holds the measured raw rows with a ``cls`` column
    (:func:`analysis.stages.summary.measured_requests`); None reads percentiles from ``summary``.
    """
    if not params.given:
        return None
    red = {v.stage for v in knee.stages if v.verdict == "red_line"}
    steps = level_rows(summary).sort_values(["target_users", "stage"])  # baseline: the yardstick
    by_stage = dict(tuple(measured.groupby("stage"))) if measured is not None else {}
    stages = []
    for _, row in steps.iterrows():
        rows = None
        if measured is not None:
            rows = by_stage.get(row["stage"], measured.iloc[0:0])
        stages.append(evaluate_stage(row, rows, params, red_line=int(row["stage"]) in red))
    judged = tuple(stages)
    capacity = slo_capacity(judged)
    binding = binding_constraint(capacity, knee.max_concurrency)
    doubt = capacity_doubt(judged, knee)
    summary_text = _summary(judged, capacity, knee, binding)
    return SloResult(
        limits=params.limits_text(),
        sources=params.sources,
        stages=judged,
        capacity=capacity,
        max_concurrency=knee.max_concurrency,
        binding=binding,
        summary=summary_text + (" " + doubt if doubt else ""),
        doubt=doubt,
    )
