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

Every verdict is a value (:mod:`analysis.slo.facts`); :mod:`analysis.report.slo_words` words it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from analysis.model import KneeResult
from analysis.slo.facts import CapacityDoubt, SloBreak, SloCheck
from analysis.stages.levels import level_rows
from loadknee_core.numeric import num
from loadknee_core.slo_targets import METRIC_COLUMNS, Slo, SloParams

Binding = Literal["latency", "throughput", "none"]

__all__ = [
    "Binding",
    "SloCheck",
    "SloResult",
    "StageSlo",
    "binding_constraint",
    "capacity_doubt",
    "evaluate_slos",
    "evaluate_stage",
    "request_values",
    "slo_capacity",
]


@dataclass(frozen=True)
class StageSlo:
    """A stage judged against the SLOs."""

    stage: int
    target_users: int
    met: bool
    checks: tuple[SloCheck, ...]
    breaks: tuple[SloBreak, ...]  # what failed, each with its figures
    good_requests: int | None  # None when no --goodput thresholds were given
    judged_requests: int | None
    good_pct: float | None
    goodput_rps: float | None
    good_output_tok_s: float | None


@dataclass(frozen=True)
class SloResult:
    """The SLO verdict of a run: the targets used, each stage, the capacity and what binds."""

    params: SloParams  # the targets judged against (their words: report.slo_words)
    sources: tuple[str, ...]
    stages: tuple[StageSlo, ...]
    capacity: int | None  # highest concurrency meeting every SLO (None: no stage did)
    max_concurrency: int | None  # the knee's, for the comparison
    binding: Binding
    doubt: CapacityDoubt | None = None  # why the capacity may be off (noisy stages around it)

    @property
    def first_broken(self) -> StageSlo | None:
        """The lowest stage that broke an SLO (None: every stage met them)."""
        return next((s for s in sorted(self.stages, key=lambda s: s.target_users) if not s.met),
                    None)  # fmt: skip


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
    return SloCheck(slo.key, slo, value, slo.limit, met, over)


def _broken(check: SloCheck) -> SloBreak:
    return SloBreak("not_measured" if check.value is None else "over", check)


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
    breaks = [_broken(c) for c in checks if not c.met]
    good: dict[str, float | None] = dict.fromkeys(
        ("good_requests", "judged_requests", "good_pct", "goodput_rps", "good_output_tok_s")
    )
    if params.goodput and rows is not None:
        good = _goodput(rows, params, num(row.get("window_s")))
        pct = good["good_pct"]
        if pct is None or pct < params.goodput_min_pct:
            breaks.append(SloBreak("goodput_short", good_pct=pct, min_pct=params.goodput_min_pct))
    elif params.goodput:
        breaks.append(SloBreak("goodput_needs_rows"))
    if red_line:
        breaks.append(SloBreak("red_line"))
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


def capacity_doubt(stages: tuple[StageSlo, ...], knee: KneeResult) -> CapacityDoubt | None:
    """Why the SLO capacity may be off; None when the stages around it can be trusted.

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
    breaker: int | None = None
    again: tuple[int, ...] = ()
    if first_bad is not None:
        broken = ordered[first_bad]
        if broken.stage in doubtful and broken.stage not in red:
            breaker = broken.target_users
        again = tuple(s.target_users for s in ordered[first_bad + 1 :] if s.met)
    setter = (
        last_good.target_users if last_good is not None and last_good.stage in doubtful else None
    )
    if breaker is None and not again and setter is None:
        return None
    return CapacityDoubt(breaker, again, setter)


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
    return SloResult(
        params=params,
        sources=params.sources,
        stages=judged,
        capacity=capacity,
        max_concurrency=knee.max_concurrency,
        binding=binding,
        doubt=capacity_doubt(judged, knee),
    )
