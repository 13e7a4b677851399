"""Per-stage intervals: output tok/s and the e2e tail, by batch means over the measured window.

The computation is :mod:`loadknee_core.confidence` (stdlib, shared with the live sweep's
``--stage-seconds auto``): the measured window is cut into up to ``batches`` consecutive time
windows at least one median request long; throughput is a Student-t interval over the windows'
rates, a percentile an interval from resampling whole windows. This module feeds it each stage's
raw rows and keeps the per-window data (:class:`StageBatches`) so that
:mod:`analysis.knee.confidence` can resample the stages and re-run the knee.

:func:`analysis.stages.array_intervals.stage_batches` computes them with numpy;
``tests/analysis/stages/stdlib_intervals.py`` keeps the stdlib reference, one Python loop per row
and a sort per resample, and ``tests/analysis/stages/test_array_intervals.py`` holds the two equal.

Rows used, as in :mod:`analysis.stages.summary`: throughput counts every ok request of the stage
(any
phase) over the part of its generation (first token to end) inside the window; the tail uses the
ok rows of the measured phases, grouped by the window their request ended in (the measured
rows' window runs to the last of them, so no measured row is dropped).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from loadknee_core.confidence import MIN_BATCHES, Interval, seconds_needed
from loadknee_core.knee_params import DEFAULTS

#: columns :func:`interval_columns` adds to the record table (see analysis.model.SUMMARY_COLUMNS)
INTERVAL_COLUMNS: tuple[str, ...] = (
    "output_tok_s_low",
    "output_tok_s_high",
    "output_tok_s_hw_pct",
    "e2e_p95_low_ms",
    "e2e_p95_high_ms",
    "e2e_p99_low_ms",
    "e2e_p99_high_ms",
    "interval_batches",
    "window_needed_s",
    "slowdown_p95_low",
    "slowdown_p95_high",
    "slowdown_p99_low",
    "slowdown_p99_high",
)


@dataclass(frozen=True)
class IntervalParams:
    """How the intervals are computed (defaults: 10 windows, 95 %, the knee's interval target
    wanted: :attr:`~loadknee_core.knee_params.KneeParams.target_interval_pct`, ±5 %)."""

    batches: int = 10
    level: float = 0.95
    target_pct: float = DEFAULTS.target_interval_pct
    resamples: int = 400  # bootstrap draws per tail interval
    seed: int = 0


@dataclass(frozen=True)
class StageBatches:
    """One stage's per-window data and the intervals computed from it."""

    stage: int
    window_s: float
    batches: int  # windows used; 0 when the window is too short for an interval
    median_span_s: float | None  # median generation span of its ok requests
    rates: tuple[float, ...]  # output tok/s per window (empty when batches is 0)
    # e2e ms of the measured ok rows, per window (arrays from analysis.stages.array_intervals;
    # tuples from the stdlib reference in tests/analysis/stages/stdlib_intervals.py)
    e2e_groups: tuple[Sequence[float] | np.ndarray, ...]
    throughput: Interval | None
    p95: Interval | None
    p99: Interval | None
    # e2e_groups sorted once for resampling (analysis.stages.array_intervals.WindowPool), if built
    e2e_pool: Any = field(default=None, compare=False, repr=False)
    # the same windows' slowdowns (analysis.stages.slowdown), where the run has a single-user
    # line: their P95/P99 intervals and pool (the array code alone computes them)
    slowdown_p95: Interval | None = None
    slowdown_p99: Interval | None = None
    slowdown_pool: Any = field(default=None, compare=False, repr=False)


def _needed_s(b: StageBatches, p: IntervalParams) -> float:
    """Window length that would give ±target_pct, or (too short for any interval) at least
    MIN_BATCHES median requests; NaN when nothing is known."""
    if b.throughput is not None:
        return seconds_needed(b.throughput, b.window_s, target_pct=p.target_pct)
    if b.median_span_s:
        return float(math.ceil(MIN_BATCHES * b.median_span_s * 1.1))  # a little past the edge
    return math.nan


def interval_columns(
    batches: dict[int, StageBatches], *, params: IntervalParams | None = None
) -> pd.DataFrame:
    """The :data:`INTERVAL_COLUMNS` per stage (index: stage); NaN where there is no interval."""
    p = params or IntervalParams()
    nan = math.nan
    rows = {}
    for stage, b in batches.items():
        t, p95, p99 = b.throughput, b.p95, b.p99
        s95, s99 = b.slowdown_p95, b.slowdown_p99
        rows[stage] = {
            "output_tok_s_low": t.low if t else nan,
            "output_tok_s_high": t.high if t else nan,
            "output_tok_s_hw_pct": t.half_width_pct if t else nan,
            "e2e_p95_low_ms": p95.low if p95 else nan,
            "e2e_p95_high_ms": p95.high if p95 else nan,
            "e2e_p99_low_ms": p99.low if p99 else nan,
            "e2e_p99_high_ms": p99.high if p99 else nan,
            "interval_batches": float(b.batches),
            "window_needed_s": _needed_s(b, p),
            "slowdown_p95_low": s95.low if s95 else nan,
            "slowdown_p95_high": s95.high if s95 else nan,
            "slowdown_p99_low": s99.low if s99 else nan,
            "slowdown_p99_high": s99.high if s99 else nan,
        }
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(INTERVAL_COLUMNS))
