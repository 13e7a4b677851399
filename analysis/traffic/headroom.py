"""Headroom: how far a log's in-flight peak is from what a run says the deployment allows.

1. **What the run allows** (:func:`run_capacity`): with SLOs (given, or those the sweep ran
   with) their capacity, the highest concurrency meeting every SLO, unless the knee comes first
   (past it throughput is flat, whatever the SLOs allow); otherwise the knee's
   ``max_concurrency``, the users of the stage before the knee. A run with no knee allows at
   least its highest level judged with confidence (trusted, not noisy): the headroom is then a
   lower bound ("≥"). A run whose analysis cannot tell (exit 3: no stage judged, or a late load
   generator at or below the first level past the answer) allows nothing: no headroom from it.
2. **Headroom** (:func:`headroom`): allowed ÷ the log's peak in flight (and ÷ its P95).
3. **Growth**: the curve scaled by each of ``scales`` (more traffic of the same shape; below the
   knee the latency holds, so by Little's law the in-flight count scales with the rate). The
   first scale whose peak passes the allowed count is the growth that breaks the deployment; the
   first time bin whose maximum passes it is when, in the log's day, it breaks first.

The run also gives a latency model for Little's law when the log has no durations: the lowest
step stage's median TTFT and TPOT (light load: a lower bound on production latency).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from analysis.pipeline import Analysis
from analysis.report.slo_words import limits_text
from analysis.report.standing import cannot_tell_text
from analysis.stages.levels import level_rows
from analysis.traffic.shape import LatencyModel, TrafficShape
from loadknee_core.numeric import cell

#: ``cannot_tell``: the run's analysis cannot tell (exit 3: docs/method.md), so it allows nothing
CapacityKind = Literal["knee", "slo", "tested", "cannot_tell"]
SCALES: tuple[float, ...] = (1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


@dataclass(frozen=True)
class Capacity:
    """In-flight requests the run says the deployment allows, and where the figure comes from."""

    users: int | None  # None: not even the lowest tested level was safe
    kind: CapacityKind
    text: str  # e.g. "the knee allows 24"
    run_id: str
    latency: LatencyModel | None = None


@dataclass(frozen=True)
class Headroom:
    peak: int
    p95: float
    allowed: int
    lower_bound: bool  # the run found no knee: the deployment allows at least ``allowed``
    ratio: float  # allowed / peak
    p95_ratio: float | None
    breaking_scale: float | None  # the first of the scales whose peak passes ``allowed``
    breaks_at_s: float | None  # start of the first bin past ``allowed`` at that scale
    text: str


def _latency(summary: pd.DataFrame, run_id: str) -> LatencyModel | None:
    steps = level_rows(summary)
    if steps.empty or "e2e_mean_ms" not in steps:
        return None
    row = steps.sort_values("target_users").iloc[0]
    mean = float(row["e2e_mean_ms"])
    if not math.isfinite(mean) or mean <= 0:
        return None
    ttft, tpot = cell(row, "ttft_p50_ms"), cell(row, "tpot_p50_ms")
    users = int(row["target_users"])
    source = f"run {run_id} at {users} user{'s' if users != 1 else ''} (light load)"
    if ttft is not None and tpot is not None and ttft >= 0 and tpot >= 0:
        return LatencyModel(mean / 1000, source, ttft / 1000, tpot / 1000)
    return LatencyModel(mean / 1000, source)


def run_capacity(analysis: Analysis) -> Capacity:
    """What one analysed run allows (see the module docstring)."""
    knee, slo, run_id = analysis.knee, analysis.slo, analysis.run_id
    latency = _latency(analysis.summary, run_id)
    if analysis.standing.cannot_tell:  # no answer, so no headroom from it (a late client…)
        text = cannot_tell_text(analysis.standing, knee).removeprefix("cannot tell: ")
        return Capacity(None, "cannot_tell", text, run_id, latency)
    if slo is not None:
        if slo.capacity is None:
            return Capacity(None, "slo", "no tested level met the SLOs", run_id, latency)
        text = f"the SLOs ({limits_text(slo.params)}) allow {slo.capacity}"
        before_knee = knee.max_concurrency if knee.knee_users is not None else None
        if before_knee is not None and before_knee < slo.capacity:
            text += f", the knee {before_knee}: the knee binds"
            return Capacity(before_knee, "knee", text, run_id, latency)
        return Capacity(slo.capacity, "slo", text, run_id, latency)
    if knee.knee_users is not None:
        if knee.max_concurrency is None:
            text = f"the knee is at the lowest tested level ({knee.knee_users})"
            return Capacity(None, "knee", text, run_id, latency)
        return Capacity(
            knee.max_concurrency, "knee", f"the knee allows {knee.max_concurrency}", run_id, latency
        )
    # a lower bound only from stages judged with confidence: a noisy stage (too short, too
    # few requests) could not have shown the knee, so it proves nothing about what is allowed
    tested = [
        v.target_users
        for v in knee.stages
        if v.trusted and not v.noisy and v.verdict != "insufficient_data"
    ]
    if not tested:
        return Capacity(None, "tested", "the run has no judged stage", run_id, latency)
    top = max(tested)
    return Capacity(
        top, "tested", f"no knee up to {top}: it allows at least {top}", run_id, latency
    )


def _x(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") + "×"


def headroom(
    shape: TrafficShape, capacity: Capacity, *, scales: tuple[float, ...] = SCALES
) -> Headroom | None:
    """The headroom figure and the first breaking scale; None without a curve or a capacity."""
    dist = shape.inflight
    if dist is None or capacity.users is None or dist.max <= 0:
        return None
    allowed, peak = capacity.users, int(dist.max)
    lower = capacity.kind == "tested"
    ratio = allowed / peak
    p95_ratio = allowed / dist.p95 if dist.p95 > 0 else None
    at_least = "≥ " if lower else ""
    text = (
        f"production peaks at {peak} in flight (P95 {dist.p95:g}); {capacity.text}: "
        f"{at_least}{_x(ratio)} headroom"
    )
    breaking = None if lower else next((s for s in sorted(scales) if peak * s > allowed), None)
    breaks_at = None
    if breaking is not None and shape.inflight_max and shape.first_start_s is not None:
        k = next(i for i, m in enumerate(shape.inflight_max) if m * breaking > allowed)
        breaks_at = shape.first_start_s + k * shape.bin_s
    if lower and peak > allowed:
        text = (
            f"production peaks at {peak} in flight (P95 {dist.p95:g}); {capacity.text}, below "
            f"the peak: cannot tell the headroom; sweep past {peak} users"
        )
    elif lower:
        text += " (the run found no knee, so the deployment may take more)"
    elif peak > allowed:
        text = (
            f"production peaks at {peak} in flight (P95 {dist.p95:g}); {capacity.text}: the "
            f"peak is already past it ({_x(ratio)})"
        )
    elif breaking is not None:
        text += f"; traffic ×{breaking:g} is the first step past it"
    return Headroom(peak, dist.p95, allowed, lower, ratio, p95_ratio, breaking, breaks_at, text)
