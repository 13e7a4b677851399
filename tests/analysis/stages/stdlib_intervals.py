"""The stdlib reference for :func:`analysis.stages.array_intervals.stage_batches`: each stage's
rows fed to :mod:`loadknee_core.confidence` (one Python loop per row, a sort per resample), the
way the analysis computed its intervals before the numpy version. The tests hold the two equal.
:func:`resampled_tables` lays the knee's resampled columns out as whole record tables, for tests
that compare against :func:`~analysis.knee.find.find_knee` on a table.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping

import numpy as np
import pandas as pd

from analysis.stages.array_intervals import cleared, resampled_columns
from analysis.stages.intervals import IntervalParams, StageBatches
from loadknee_core.confidence import (
    Interval,
    batch_count,
    batch_groups,
    batch_rates,
    mean_interval,
    tail_interval,
)


def _ok(requests: pd.DataFrame) -> pd.DataFrame:
    mismatch = (requests["outcome"] == "length_mismatch") | (requests["length_ok"] == 0)
    return requests[(requests["outcome"] == "ok") & ~mismatch]


def stage_batches(
    requests: pd.DataFrame,
    windows: pd.DataFrame,
    *,
    measured_phases: tuple[str, ...] = ("measure", "baseline"),
    params: IntervalParams | None = None,
) -> dict[int, StageBatches]:
    """Per stage of ``windows`` (``window_start``/``window_end`` by stage): its batches."""
    p = params or IntervalParams()
    ok = _ok(requests)
    out: dict[int, StageBatches] = {}
    for stage, w_start, w_end in zip(
        windows.index, windows["window_start"], windows["window_end"], strict=True
    ):
        rows = ok[ok["stage"] == stage]
        start, end = float(w_start), float(w_end)
        ends = rows["end_unix_s"].to_numpy(dtype=float)
        starts = rows["start_unix_s"].to_numpy(dtype=float) + np.nan_to_num(
            rows["ttft_ms"].to_numpy(dtype=float) / 1000.0
        )
        starts = np.minimum(starts, ends)
        tokens = rows["completion_tokens"].to_numpy(dtype=float)
        keep = ~np.isnan(tokens) & ~np.isnan(ends)
        ends_l, starts_l, tokens_l = list(ends[keep]), list(starts[keep]), list(tokens[keep])
        valid = end > start and not math.isnan(start)
        count = (
            batch_count(start, end, starts_s=starts_l, ends_s=ends_l, batches=p.batches)
            if valid
            else 0
        )
        rates = (
            batch_rates(ends_l, tokens_l, start, end, starts_s=starts_l, batches=p.batches)
            if valid
            else None
        )
        inside = sum(1 for e in ends_l if start <= e <= end) if valid else 0
        throughput = mean_interval(rates, n=inside, level=p.level) if rates else None
        measured = rows[rows["phase"].isin(measured_phases)]
        m_ends = list(measured["end_unix_s"].to_numpy(dtype=float))
        e2e = list(measured["e2e_ms"].to_numpy(dtype=float))
        # the measured rows end from about one request after the window opens to one after
        # it closes: their own span, so the first time window is not empty by construction
        tail_start = min(m_ends) if m_ends else start
        tail_end = max([end, *m_ends]) if valid else end
        tail_count = (
            batch_count(tail_start, tail_end, starts_s=starts_l, ends_s=ends_l, batches=p.batches)
            if valid
            else 0
        )
        tails: dict[float, Interval | None] = {}
        for q in (0.95, 0.99):
            tails[q] = (
                tail_interval(
                    m_ends,
                    e2e,
                    tail_start,
                    tail_end,
                    q=q,
                    batches=tail_count,
                    level=p.level,
                    resamples=p.resamples,
                    seed=p.seed,
                )
                if valid and tail_count
                else None
            )
        groups = (
            batch_groups(m_ends, e2e, tail_start, tail_end, batches=tail_count) if valid else []
        )
        spans = [e - s for s, e in zip(starts_l, ends_l, strict=True)]
        out[int(stage)] = StageBatches(
            stage=int(stage),
            window_s=end - start if valid else math.nan,
            batches=count if rates else 0,
            median_span_s=float(np.median(spans)) if spans else None,
            rates=tuple(rates or ()),
            e2e_groups=tuple(tuple(g) for g in groups),
            throughput=throughput,
            p95=tails[0.95],
            p99=tails[0.99],
        )
    return out


def resampled_tables(
    summary: pd.DataFrame,
    batches: Mapping[int, StageBatches],
    rng: random.Random,
    column: str,
    resamples: int,
) -> Iterator[pd.DataFrame]:
    """:func:`~analysis.stages.array_intervals.resampled_columns` as whole record tables, one
    per resample."""
    base = cleared(summary)
    columns = resampled_columns(summary, batches, rng, column, resamples)
    for r in range(resamples):
        out = base.copy()
        for name, values in columns.items():
            out[name] = values[r]
        yield out
