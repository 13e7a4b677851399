"""The record table as the knee rule reads it: each stage once, and what all are judged against.

:class:`KneeInputs` takes the frame apart once: every stage as a dict, the level stages in order
of users, GPU memory's flatness, the server's and the client's slots, the fit's levels and the
single-user tail yardstick (:func:`tail_yardstick`). :func:`~analysis.knee.find.judge` reads it;
the knee's confidence (:mod:`analysis.knee.confidence`) swaps in 200 resampled throughput and
tail columns (:meth:`KneeInputs.with_columns`) and judges again, without the frame.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from copy import copy
from typing import Any

import numpy as np
import pandas as pd

from analysis.knee.client_signals import client_slots
from analysis.knee.facts import TailSource, tail_column
from analysis.knee.fit import KneeFit, Levels
from analysis.knee.noisy_stages import noise_in_doubt
from analysis.knee.signals import StageContext, tail_figures
from analysis.knee.stage_verdict import StageFacts
from analysis.model import Baseline, KneeResult
from analysis.stages.data_check import RowsFact
from analysis.stages.levels import level_mask
from loadknee_core.knee_params import KneeParams
from loadknee_core.numeric import num

#: GPU memory peaks closer than this (points) across stages are pre-allocation, not load
FLAT_GPU_SPREAD_PCT = 2.0


def _records(frame: pd.DataFrame) -> list[Any]:
    """``frame.iterrows()``'s rows (the same values) as dicts: the signals read a row only by
    ``row[...]`` and ``row.get(...)``, and a dict's lookups are ~50× a Series' (the knee's
    confidence runs this rule 200 times per analysis)."""
    columns = list(frame.columns)
    return [dict(zip(columns, values, strict=True)) for values in frame.values]


def _floats(frame: pd.DataFrame, column: str) -> np.ndarray:
    """``column`` as floats, a missing value NaN."""
    return frame[column].to_numpy(dtype=float, na_value=np.nan)


#: the columns the knee's confidence resamples: no :class:`StageFacts` reads them
RESAMPLED_COLUMNS = frozenset(
    {
        "output_tok_s",
        "total_tok_s",
        "qps",
        "e2e_p95_ms",
        "e2e_p99_ms",
        "slowdown_p95",
        "slowdown_p99",
    }
)
#: the columns :class:`KneeInputs` reads once; :meth:`KneeInputs.with_columns` may not replace them
FIXED_COLUMNS = frozenset(
    {
        "kind",
        "stage",
        "target_users",
        "ok",
        "gpu_mem_peak_pct",
        "running_max",
        "client_running",
        "output_tok_s_hw_pct",
    }
)


class KneeInputs:
    """A record table as the knee rule reads it, taken from the frame once: every stage as a
    dict, the level stages' order, and what the stages are judged against that no throughput or
    tail figure changes (GPU memory flatness, the server's and the client's slots, the fit's
    levels). :func:`~analysis.knee.find.find_knee` judges one; the knee's confidence
    (:mod:`analysis.knee.confidence`) takes one and judges it again with 200 resampled
    throughput and tail columns (:meth:`with_columns`) — the same rule, without rebuilding
    the rest from a frame each time."""

    def __init__(self, summary: pd.DataFrame, baseline: Baseline, params: KneeParams) -> None:
        self.baseline, self.params = baseline, params
        self.columns = frozenset(summary.columns)
        #: every stage (the baseline stage is the first one compared with), as :func:`_records`
        self.records = _records(summary)
        self.values = {params.throughput_column: _floats(summary, params.throughput_column)}
        level = level_mask(summary)
        users, stage = _floats(summary, "target_users")[level], _floats(summary, "stage")[level]
        #: the level stages sorted by users, then stage (NaN last, ties kept in order)
        self.order = np.flatnonzero(level)[np.lexsort((stage, users))].tolist()
        self.base_at: int | None = None
        if baseline.stage is not None:
            hit = np.flatnonzero(summary["stage"].to_numpy() == baseline.stage)
            self.base_at = int(hit[0]) if len(hit) else None
        steps = summary.iloc[self.order]
        tails = {q: getattr(baseline, tail_column(params.tail_metric, q)) for q in ("p95", "p99")}
        used = params.tail_percentile
        if tails[used] is None:  # e.g. a typed-in record table with P99 only
            used = "p99" if used == "p95" else "p95"
            used = used if tails[used] is not None else params.tail_percentile
        self.tail_used, self.base_tail = used, tails[used]
        all_peaks = _floats(steps, "gpu_mem_peak_pct")
        peaks = all_peaks[all_peaks > 0]  # 0 = the process was down (restart), not pre-allocation
        self.gpu_flat = len(peaks) > 0 and float(peaks.max() - peaks.min()) < FLAT_GPU_SPREAD_PCT
        with_peaks = steps["target_users"].to_numpy(dtype=float)[all_peaks > 0]
        self.gpu_preallocated = (
            self.gpu_flat
            and len(peaks) >= 3
            and float(with_peaks.max()) >= 4 * max(1.0, float(with_peaks.min()))
        )
        running = _floats(steps, "running_max") if "running_max" in steps else np.array([])
        running = running[~np.isnan(running)]
        self.server_slots = float(running.max()) if len(running) and running.max() > 0 else None
        self.client_slots = client_slots(steps)
        self.levels = Levels(summary, params.throughput_column)
        #: per (stage, previous stage) position, its
        #: :func:`~analysis.knee.stage_verdict.stage_facts`
        self.facts: dict[tuple[int, int | None], StageFacts | RowsFact] = {}
        #: per stage id, whether it is noisy as another judgement found it (:meth:`noise_as`)
        self.noise: dict[int, bool] | None = None

    def noise_as(self, judged: KneeResult) -> KneeInputs:
        """These inputs with each stage as noisy as ``judged`` found it, where a stage's noise
        mattered: noisy, unless its knee cleared its noise
        (:func:`~analysis.knee.noisy_stages.knee_clears_noise`).

        Why: the knee's confidence judges resampled tables whose interval columns are cleared
        (the resample is the noise), so no stage reads as noisy there and no noisy knee yields
        to the server's word; the resamples then answered by another rule than the answer's.
        The 8-slot simulator on 1.8 s stages: the answer 8 (a noisy flattening at 8 users with
        8 of 8 slots free of a queue yields; 12 users queued), 0 % of resamples agreeing and
        100 % saying 6. Whether a stage's figures are too noisy to judge is a property of its
        measurement, not of one resample of it."""
        out = copy(self)
        out.facts = {}
        out.noise = {int(v.stage): noise_in_doubt(v) for v in judged.stages}
        return out

    def with_columns(self, values: Mapping[str, Sequence[float]]) -> KneeInputs:
        """The same table with these columns' figures (one per stage, in the table's order)
        in place of its own; the fixed parts are shared."""
        if fixed := FIXED_COLUMNS.intersection(values):
            raise ValueError(f"columns read once cannot be replaced: {sorted(fixed)}")
        out = copy(self)
        if not RESAMPLED_COLUMNS.issuperset(values):
            out.facts = {}  # a column the facts may read changed: read them again
        names = list(values)
        columns = [list(values[name]) for name in names]
        out.records = [
            {**record, **dict(zip(names, figures, strict=True))}
            for record, *figures in zip(self.records, *columns, strict=True)
        ]
        out.values = {**self.values}
        for name in names:
            if name in out.values:
                out.values[name] = np.asarray(values[name], dtype=float)
        return out

    def rows(self) -> list[Any]:
        """The level stages' records, sorted by users."""
        return [self.records[i] for i in self.order]

    def context(self, rows: list[Any], *, fit: bool = True) -> StageContext:
        """What every stage is judged against; ``rows`` are :meth:`rows` (``fit=False``:
        without the all-stages fit, :meth:`fit` left for the caller to add when it matters)."""
        params, baseline = self.params, self.baseline
        x1 = None
        if self.base_at is not None and baseline.target_users:
            x = num(self.values[params.throughput_column][self.base_at])
            x1 = None if x is None else x / baseline.target_users
        base_tail, tail_source, base_low = self.tail_yardstick(rows)
        base_median = None
        if self.base_at is not None and baseline.target_users == 1:
            base_median = num(self.records[self.base_at].get("e2e_p50_ms"))
        return StageContext(
            base_median_ms=base_median,
            x1=x1 or None,
            base_tail_ms=base_tail,
            base_tail_low_ms=base_low,
            tail_percentile=self.tail_used,
            tail_source=tail_source,
            gpu_flat=self.gpu_flat,
            gpu_preallocated=self.gpu_preallocated,
            params=params,
            server_slots=self.server_slots,
            client_slots=self.client_slots,
            fit=self.fit(x1) if fit else None,
        )

    def fit(self, x1: float | None) -> KneeFit | None:
        """The rise-then-plateau fit over the levels' throughput (``x1``: one user's rate)."""
        params = self.params
        return self.levels.fit(
            self.values[params.throughput_column],
            x1,
            flat_gain_ratio=params.flat_gain_ratio,
            resamples=params.fit_resamples,
        )

    def tail_yardstick(self, rows: list[Any]) -> tuple[float | None, TailSource, float | None]:
        """The single-user tail every stage's tail (``rows``: :meth:`rows`) is compared against,
        whose it is, and the lower end of its interval (from resampling that stage's time
        windows; None where it has none).

        The baseline's, unless a 1-user level measured at least as many requests and found a
        lower tail: then that level's. Interference (another process, a cold cache, a busy
        client) only ever adds latency, so the lower of two one-at-a-time tails is the nearer to
        the server's own; a stage's interval already covers its own noise, but not a yardstick
        inflated by one slow request: a 10-request baseline on a busy machine can show a P95 of
        9.9 s at a median of 2.75 s while the 1-user level's 32 requests show 4.4 s, and against
        9.9 s a 16-user stage of an 8-slot server, half its requests queued, would read as "tail
        not departed".
        """
        used, baseline, base_tail = self.tail_used, self.baseline, self.base_tail
        column = tail_column(self.params.tail_metric, used)

        def low(row: Any | None) -> float | None:
            """The row's lower bound of its tail (:func:`~analysis.knee.signals.tail_figures`).
            A stage too short for an interval (a 10-request baseline) falls back on its
            median: a tail is never below it, and a P95 far above it is one slow request, the
            noise this bound is for."""
            if row is None:
                return None
            figures = tail_figures(row, self.params.tail_metric, used)
            bound = figures.low if figures.low is not None else figures.median
            if figures.tail is None or bound is None:
                return None
            return min(bound, figures.tail)

        if baseline.source != "baseline" or base_tail is None or column not in self.columns:
            return base_tail, "baseline", None
        best: float = base_tail
        source: TailSource = "baseline"
        base_row = None if self.base_at is None else self.records[self.base_at]
        is_baseline = base_row is not None and base_row.get("kind") == "baseline"
        best_low = low(base_row) if is_baseline else None
        for row in (r for r in rows if r["target_users"] == 1):
            tail = num(row[column])
            if tail is not None and int(row["ok"]) >= baseline.requests and 0 < tail < best:
                best, source, best_low = tail, "one_user_level", low(row)
        return best, source, best_low
