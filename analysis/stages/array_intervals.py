"""The stages' intervals and the knee's resamples with numpy: the stdlib figures, faster.

:mod:`loadknee_core.confidence` (stdlib, for the live sweep) defines the intervals: batch
means over time windows for throughput, a block bootstrap of whole windows for a tail percentile.
Its percentiles sort every resampled pool in Python: 400 resamples per stage and percentile, each
a sort of the stage's rows, most of a million-row analysis. This module computes the same
figures, bit for bit, on arrays:

1. **The same random draws.** Each resample's windows come from ``random.Random(seed)`` in the
   order the stdlib code draws them (``choices`` over window numbers uses the generator exactly
   as ``choices`` over the windows does), so every resample pools the same windows.
2. **A resample is a count per window.** Resample ``r`` drew window ``g`` ``w[r, g]`` times; its
   pool is the stage's values with those multiplicities. The values are sorted once per stage;
   ``C[g, i]`` counts window ``g``'s values among the ``i`` smallest, so ``w[r] · C[:, i]`` is how
   many of resample ``r``'s pool lie among them, and the ``k``-th smallest of every pool is found
   by one bisection over ``i`` for all resamples at once (about 17 steps of ``resamples × windows``
   work, in place of ``resamples`` sorts).
3. **The same arithmetic.** Percentiles interpolate as
:func:`~loadknee_core.confidence.quantile`
   does (``v[lo] + (v[hi] - v[lo]) · (pos - lo)``, numpy's default method, the same float
   operations); window rates add each request's share to its windows in row order
   (``np.bincount`` accumulates in order, as the stdlib loop does), so sums round alike.

``tests/analysis/stages/test_array_intervals.py`` holds the two implementations to the same figures
on the same
rows. :func:`stage_batches` and :func:`resampled_columns` replace their stdlib counterparts
(``tests/analysis/stages/stdlib_intervals.py`` and the knee's one-resample-at-a-time loop in that
test).
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from analysis.stages.groups import median
from analysis.stages.intervals import INTERVAL_COLUMNS, IntervalParams, StageBatches
from analysis.stages.row_classes import MEASURED_PHASES, RowClasses
from loadknee_core.confidence import (
    MIN_BATCHES,
    MIN_TAIL_VALUES,
    Interval,
    mean_interval,
    quantile,
)

FloatArray = np.ndarray


def median_span(starts: FloatArray, ends: FloatArray) -> float:
    """``statistics.median`` of ``max(0, end - start)`` (the same middle, the same mean of two)."""
    spans = np.maximum(ends - starts, 0.0)
    n = len(spans)
    if n % 2:  # one rank: numpy's fast selection
        return float(np.partition(spans, n // 2)[n // 2])
    ordered = np.sort(spans)  # two ranks: its sort is faster (analysis.stages.groups)
    return (float(ordered[n // 2 - 1]) + float(ordered[n // 2])) / 2


def batch_count(
    start_s: float,
    end_s: float,
    *,
    starts: FloatArray | None,
    ends: FloatArray | None,
    batches: int,
    span: float | None = None,
) -> int:
    """:func:`loadknee_core.confidence.batch_count` on arrays (``span``: their
    :func:`median_span`, when the caller already has it)."""
    length = end_s - start_s
    if not length > 0 or batches < 1:
        return 0
    if starts is not None and ends is not None and len(ends):
        span = median_span(starts, ends) if span is None else span
        if span > 0:
            return max(0, min(batches, int(length / span)))
    return batches


def batch_rates(
    ends: FloatArray,
    amounts: FloatArray,
    start_s: float,
    end_s: float,
    *,
    starts: FloatArray,
    batches: int,
    span: float | None = None,
) -> list[float] | None:
    """:func:`loadknee_core.confidence.batch_rates` on arrays (``starts`` <= ``ends``;
    ``span``: their :func:`median_span`, when the caller already has it)."""
    count = batch_count(start_s, end_s, starts=starts, ends=ends, batches=batches, span=span)
    if count < MIN_BATCHES:
        return None
    width = (end_s - start_s) / count
    begin = np.minimum(starts, ends)
    point = begin == ends
    # a point counts wholly in the window that holds it
    p_in = point & (start_s <= ends) & (ends <= end_s)
    p_k = np.minimum(count - 1, ((ends - start_s) / width).astype(np.int64, copy=False))
    # a span counts per second of its overlap with each window it touches
    lo, hi = np.maximum(begin, start_s), np.minimum(ends, end_s)
    span = ~point & (hi > lo)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_s = amounts / (ends - begin)
        first = ((lo - start_s) / width).astype(np.int64, copy=False)
        last = np.minimum(count - 1, ((hi - start_s) / width).astype(np.int64, copy=False))
    n_k = np.where(span, np.maximum(last - first + 1, 0), 0)
    n_k = np.where(p_in, 1, n_k)
    first = np.where(p_in, p_k, first)
    # one (row, window) pair per contribution, rows in order and windows ascending within a row,
    # so np.bincount adds each window's parts in the stdlib loop's order
    rows = np.repeat(np.arange(len(ends)), n_k)
    offsets = np.arange(len(rows)) - np.repeat(np.cumsum(n_k) - n_k, n_k)
    k = first[rows] + offsets
    w_lo, w_hi = start_s + k * width, start_s + (k + 1) * width
    overlap = np.minimum(hi[rows], w_hi) - np.maximum(lo[rows], w_lo)
    is_point = p_in[rows]
    with np.errstate(invalid="ignore"):  # a point's per-second rate is inf; it counts whole
        part = np.where(is_point, amounts[rows], per_s[rows] * overlap)
    keep = is_point | (overlap > 0)
    sums = np.bincount(k[keep], weights=part[keep], minlength=count)
    return [float(s) / width for s in sums]


def window_of(ends: FloatArray, start_s: float, end_s: float, *, batches: int) -> FloatArray:
    """Per value, the window its request ended in (:func:`~loadknee_core.confidence.
    batch_groups`' numbering); -1 outside the window."""
    out = np.full(len(ends), -1, dtype=np.int64)
    if batches < 1 or not end_s > start_s:
        return out
    width = (end_s - start_s) / batches
    inside = (start_s <= ends) & (ends <= end_s)
    out[inside] = np.minimum(batches - 1, ((ends[inside] - start_s) / width).astype(np.int64))
    return out


class WindowPool:
    """One stage's values by window, sorted once, for the percentiles of resampled pools."""

    def __init__(self, values: FloatArray, windows: FloatArray) -> None:
        """``windows[i]`` is the (0-based, dense) window of ``values[i]``; no NaN values."""
        order = np.argsort(values)  # ties in any order: the k-th smallest value is the same
        self.sorted = values[order]
        self.groups = int(windows.max()) + 1 if len(windows) else 0
        self.sizes = np.bincount(windows, minlength=self.groups)
        onehot = windows[order][None, :] == np.arange(self.groups)[:, None]
        # counts[g, i]: window g's values among the i smallest
        self.counts = np.zeros((self.groups, len(values) + 1), dtype=np.int32)
        np.cumsum(onehot, axis=1, dtype=np.int32, out=self.counts[:, 1:])

    def kth(self, weights: FloatArray, k: FloatArray) -> FloatArray:
        """Per resample (row of ``weights``: draws per window), its ``k``-th smallest value."""
        lo = np.ones(len(k), dtype=np.int64)
        hi = np.full(len(k), len(self.sorted), dtype=np.int64)
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = (lo + hi) // 2
            below = np.einsum("rg,gr->r", weights, self.counts[:, mid])
            enough = below >= k + 1
            hi = np.where(active & enough, mid, hi)
            lo = np.where(active & ~enough, mid + 1, lo)
        return self.sorted[lo - 1]

    def quantiles(self, weights: FloatArray, q: float) -> FloatArray:
        """Per resample, :func:`~loadknee_core.confidence.quantile` of its pool at ``q``."""
        return self.quantiles_at(weights, (q,))[0]

    def quantiles_at(self, weights: FloatArray, qs: Sequence[float]) -> list[FloatArray]:
        """:meth:`quantiles` at each of ``qs``: the ranks of every percentile found by one
        bisection (the resamples stacked once per rank; counts are integers, so each row's
        search is the one it would be alone)."""
        if not qs:
            return []
        n = weights @ self.sizes
        ranks, places = [], []
        for q in qs:
            pos = q * (n - 1).astype(float)
            lo = np.floor(pos).astype(np.int64)
            ranks += [lo, np.minimum(lo + 1, n - 1)]
            places.append((pos, lo))
        found = self.kth(np.tile(weights, (len(ranks), 1)), np.concatenate(ranks))
        v = found.reshape(len(ranks), len(weights))
        return [
            v[2 * j] + (v[2 * j + 1] - v[2 * j]) * (pos - lo) for j, (pos, lo) in enumerate(places)
        ]

    def point(self, q: float) -> float:
        """:func:`~loadknee_core.confidence.quantile` of all the values."""
        n = len(self.sorted)
        pos = q * (n - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, n - 1)
        a, b = float(self.sorted[lo]), float(self.sorted[hi])
        return a + (b - a) * (pos - lo)


def pool_of(values: FloatArray, win: FloatArray, batches: int) -> WindowPool | None:
    """The values by the (non-empty) window their request ended in (``win``; -1: none, NaN
    values' too); None when no window holds any. Its windows are numbered densely in time
    order, as the stdlib code keeps its non-empty groups."""
    used = win >= 0
    if not used.any():
        return None
    held = np.bincount(win[used], minlength=batches) > 0
    dense = np.cumsum(held) - 1  # window number -> its place among the non-empty ones
    return WindowPool(values[used], dense[win[used]])


def window_groups(values: FloatArray, win: FloatArray, batches: int) -> tuple[FloatArray, ...]:
    """Per window ``0…batches-1``, its values in row order (``win``: each value's window, -1
    for none): one stable sort by window, not a pass over the values per window."""
    order = np.argsort(win, kind="stable")
    cuts = np.searchsorted(win[order], np.arange(batches + 1), side="left")
    ordered = values[order]
    return tuple(ordered[cuts[g] : cuts[g + 1]] for g in range(batches))


@functools.lru_cache(maxsize=64)
def seeded_draws(seed: int, groups: int, resamples: int) -> FloatArray:
    """:func:`draw_counts` from a fresh ``random.Random(seed)``: every stage with as many windows
    draws the same counts (its tails reseed), so they are drawn once per run, not per stage
    (read-only: shared)."""
    counts = draw_counts(random.Random(seed), groups, resamples)
    counts.flags.writeable = False
    return counts


#: 2**26 and 2**-53: CPython's ``random()`` makes a double of two 32-bit words as
#: ``((a >> 5) * 2**26 + (b >> 6)) * 2**-53`` (``_randommodule.c``, ``genrand_res53``)
_HIGH, _SCALE = 67108864.0, 1.0 / 9007199254740992.0


def uniforms(rng: random.Random, n: int) -> FloatArray:
    """The next ``n`` values of ``rng.random()`` as an array, ``rng`` left past them.

    numpy's ``MT19937`` is CPython's generator (the same 624-word state and position, the same
    32-bit words), so the words come from ``rng``'s state in one call, not one Python call per
    value; the doubles are made as CPython makes them (exact integer arithmetic, then a power
    of two). Another generator class is asked value by value."""
    if type(rng) is not random.Random or n <= 0:
        return np.array([rng.random() for _ in range(max(n, 0))], dtype=float)
    version, internal, gauss = rng.getstate()
    bits = np.random.MT19937(0)
    key = np.array(internal[:-1], dtype=np.uint32)
    bits.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": internal[-1]}}
    raw = bits.random_raw(2 * n)
    out = ((raw[0::2] >> 5) * _HIGH + (raw[1::2] >> 6)) * _SCALE
    state = bits.state["state"]
    rng.setstate((version, (*state["key"].tolist(), int(state["pos"])), gauss))
    return out


def choice_indices(u: FloatArray, n: int) -> FloatArray:
    """``rng.choices(population, k=...)``'s picks (indices into a population of ``n``) from
    its ``random()`` values ``u``: ``floor(random() * n)``, with ``n`` a float as there."""
    return np.floor(u * float(n)).astype(np.int64)


def draw_counts(rng: random.Random, groups: int, resamples: int) -> FloatArray:
    """Per resample, how often each window was drawn by ``rng.choices(windows, k=windows)``."""
    picks = choice_indices(uniforms(rng, resamples * groups), groups).reshape(resamples, groups)
    counts = np.zeros((resamples, groups), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(resamples), groups), picks.ravel()), 1)
    return counts


def pool_intervals(
    pool: WindowPool | None,
    *,
    qs: Sequence[float],
    level: float,
    resamples: int,
    seed: int,
) -> dict[float, Interval | None]:
    """:func:`loadknee_core.confidence.tail_interval` for each of ``qs`` from the stage's
    :func:`pool_of`: the same draws serve every percentile, as the stdlib code reseeds for
    each."""
    out: dict[float, Interval | None] = dict.fromkeys(qs)
    if pool is None or pool.groups < MIN_BATCHES:
        return out
    weights = seeded_draws(seed, pool.groups, resamples)
    alpha = (1.0 - level) / 2.0
    held = [q for q in qs if len(pool.sorted) >= max(MIN_TAIL_VALUES, math.ceil(1 / (1 - q)))]
    for q, drawn in zip(held, pool.quantiles_at(weights, held), strict=True):
        draws = drawn.tolist()
        point = pool.point(q)
        low, high = quantile(draws, alpha), quantile(draws, 1.0 - alpha)
        low, high = min(low, point), max(high, point)
        half = (high - low) / 2.0
        pct = (0.0 if half == 0 else math.inf) if point == 0 else abs(half / point) * 100.0
        out[q] = Interval(point, low, high, pct, len(pool.sorted), pool.groups)
    return out


def _min(values: FloatArray) -> float:
    """Python's ``min`` of the values (NaN only when the first is NaN)."""
    return float(values[0]) if math.isnan(values[0]) else float(np.nanmin(values))


def stage_batches(
    requests: pd.DataFrame,
    windows: pd.DataFrame,
    *,
    measured_phases: tuple[str, ...] = MEASURED_PHASES,
    params: IntervalParams | None = None,
    classes: RowClasses | None = None,
    slowdown: FloatArray | None = None,
) -> dict[int, StageBatches]:
    """:func:`analysis.stages.intervals.stage_batches` on arrays (its ``e2e_groups`` are arrays;
    ``classes``: the rows' :class:`~analysis.stages.row_classes.RowClasses` for
    ``measured_phases``, when already known). ``slowdown`` (per row of ``requests``: its
    :mod:`analysis.stages.slowdown`) adds the slowdown's tail intervals and pool, from the same
    windows as the e2e's."""
    p = params or IntervalParams()
    classes = classes or RowClasses.of(requests, measured_phases)
    ok = classes.ok  # the rows of analysis.stages.intervals
    stage_of = requests["stage"].to_numpy()[ok]
    by_stage = np.argsort(stage_of, kind="stable")  # each stage's rows together, in row order
    order, sorted_stage = np.flatnonzero(ok)[by_stage], stage_of[by_stage]
    wanted = windows.index.to_numpy()
    bounds = np.searchsorted(sorted_stage, wanted, side="left")
    bounds_hi = np.searchsorted(sorted_stage, wanted, side="right")
    cols = {
        name: requests[name].to_numpy(dtype=float)[order]
        for name in ("end_unix_s", "start_unix_s", "ttft_ms", "completion_tokens", "e2e_ms")
    }
    phase = classes.measured[order]
    slow = None if slowdown is None else np.asarray(slowdown, dtype=float)[order]
    out: dict[int, StageBatches] = {}
    for i, (stage, w_start, w_end) in enumerate(
        zip(windows.index, windows["window_start"], windows["window_end"], strict=True)
    ):
        rows = slice(int(bounds[i]), int(bounds_hi[i]))
        start, end = float(w_start), float(w_end)
        ends = cols["end_unix_s"][rows]
        starts = cols["start_unix_s"][rows] + np.nan_to_num(cols["ttft_ms"][rows] / 1000.0)
        starts = np.minimum(starts, ends)
        tokens = cols["completion_tokens"][rows]
        keep = ~np.isnan(tokens) & ~np.isnan(ends)
        ends_k, starts_k, tokens_k = ends[keep], starts[keep], tokens[keep]
        valid = end > start and not math.isnan(start)
        # the three window counts below read the same spans: their median once, not thrice
        span = median_span(starts_k, ends_k) if valid and len(ends_k) else None
        rates = (
            batch_rates(ends_k, tokens_k, start, end, starts=starts_k, batches=p.batches, span=span)
            if valid
            else None
        )
        count = (
            batch_count(start, end, starts=starts_k, ends=ends_k, batches=p.batches, span=span)
            if valid
            else 0
        )
        inside = int(np.count_nonzero((start <= ends_k) & (ends_k <= end))) if valid else 0
        throughput = mean_interval(rates, n=inside, level=p.level) if rates else None
        measured = phase[rows]
        m_ends, e2e = ends[measured], cols["e2e_ms"][rows][measured]
        tail_start = _min(m_ends) if len(m_ends) else start
        tail_end = max(end, float(np.nanmax(m_ends))) if valid and len(m_ends) else end
        tail_count = (
            batch_count(
                tail_start, tail_end, starts=starts_k, ends=ends_k, batches=p.batches, span=span
            )
            if valid
            else 0
        )
        tails: dict[float, Interval | None] = {0.95: None, 0.99: None}
        groups: tuple[FloatArray, ...] = ()
        pool = None
        if valid:
            win = window_of(m_ends, tail_start, tail_end, batches=tail_count)
            win[np.isnan(e2e)] = -1
            groups = window_groups(e2e, win, tail_count)
        if valid and tail_count:
            pool = pool_of(e2e, win, tail_count)  # the same windows, not found again
            tails = pool_intervals(
                pool, qs=(0.95, 0.99), level=p.level, resamples=p.resamples, seed=p.seed
            )
        slow_tails: dict[float, Interval | None] = {0.95: None, 0.99: None}
        slow_pool = None
        if slow is not None and valid and tail_count:
            values = slow[rows][measured]
            slow_win = np.where(np.isnan(values), -1, win)
            slow_pool = pool_of(values, slow_win, tail_count)
            slow_tails = pool_intervals(
                slow_pool, qs=(0.95, 0.99), level=p.level, resamples=p.resamples, seed=p.seed
            )
        spans = ends_k - starts_k
        out[int(stage)] = StageBatches(
            stage=int(stage),
            window_s=end - start if valid else math.nan,
            batches=count if rates else 0,
            median_span_s=median(spans) if len(spans) else None,
            rates=tuple(rates or ()),
            e2e_groups=groups,
            throughput=throughput,
            p95=tails[0.95],
            p99=tails[0.99],
            e2e_pool=pool,
            slowdown_p95=slow_tails[0.95],
            slowdown_p99=slow_tails[0.99],
            slowdown_pool=slow_pool,
        )
    return out


#: the interval column every resample keeps (:func:`cleared`): the stage's relative precision
KEPT_IN_RESAMPLES = frozenset({"output_tok_s_hw_pct"})


def cleared(summary: pd.DataFrame) -> pd.DataFrame:
    """``summary`` with its interval columns cleared: the table every resample starts from, so
    the resample itself is the noise. The throughput's half-width in % stays: a stage's
    precision is its measurement's, so a flattening undecided within it is undecided in a
    resample too (:func:`analysis.knee.signals.throughput_signals`, whose upper bound it
    sets); cleared, the resamples judged the gain on its point alone, by another rule than the
    answer's."""
    base = summary.copy()
    base.loc[:, [c for c in INTERVAL_COLUMNS if c not in KEPT_IN_RESAMPLES]] = np.nan
    return base


def resampled_columns(
    summary: pd.DataFrame,
    batches: Mapping[int, StageBatches],
    rng: random.Random,
    column: str,
    resamples: int,
) -> dict[str, FloatArray]:
    """The knee's resampled columns (:mod:`analysis.knee.confidence`): per column, a
    ``resamples × stages`` array whose row ``r`` is resample ``r``'s figure per stage of
    ``summary`` (in its order); the rest of each resampled table is :func:`cleared`'s.

    Every stage with window rates gets, per resample, the mean of drawn window rates as its
    output tok/s (``column`` moves with it) and the percentiles of the drawn windows' e2e values
    as its P95/P99 (and of their slowdowns, where the stages have them); the draws are taken
    from ``rng`` in the one-resample-at-a-time order.
    """
    stages = [int(s) for s in summary["stage"]]
    plan: list[tuple[int, StageBatches, WindowPool | None]] = []
    for i, stage in enumerate(stages):
        b = batches.get(stage)
        if b is None or not b.rates:
            continue
        groups = [np.asarray(g, dtype=float) for g in b.e2e_groups if len(g)]
        pool = None
        if len(groups) >= 2 and isinstance(b.e2e_pool, WindowPool):
            pool = b.e2e_pool  # the same values and windows, sorted when the tails were
        elif len(groups) >= 2:
            windows = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
            pool = WindowPool(np.concatenate(groups), windows)
        plan.append((i, b, pool))
    # the draws, in the order one resample at a time takes them: per stage rates, then windows
    # (each ``rng.choices`` takes one ``random()`` per pick: all of them at once, then cut up)
    sizes = [n for _i, b, pool in plan for n in (len(b.rates), 0 if pool is None else pool.groups)]
    cuts = np.cumsum([0, *sizes]).tolist()
    u = uniforms(rng, resamples * cuts[-1]).reshape(resamples, cuts[-1])
    rate_draws: list[list[float]] = []
    pool_draws: list[FloatArray | None] = []
    for j, (_i, b, pool) in enumerate(plan):
        n = len(b.rates)
        picks = choice_indices(u[:, cuts[2 * j] : cuts[2 * j + 1]], n)
        # Python's own sum of the drawn rates, in draw order, as the one-at-a-time loop added
        rate_draws.append([sum(drawn) / n for drawn in np.asarray(b.rates)[picks].tolist()])
        windows = u[:, cuts[2 * j + 1] : cuts[2 * j + 2]]
        pool_draws.append(None if pool is None else choice_indices(windows, pool.groups))
    tok0 = summary["output_tok_s"].to_numpy(dtype=float).copy()
    other0 = summary[column].to_numpy(dtype=float).copy()
    tok = np.tile(tok0, (resamples, 1))
    other = np.tile(other0, (resamples, 1))
    p95 = np.tile(summary["e2e_p95_ms"].to_numpy(dtype=float), (resamples, 1))
    p99 = np.tile(summary["e2e_p99_ms"].to_numpy(dtype=float), (resamples, 1))
    slowed = "slowdown_p95" in summary and any(
        isinstance(b.slowdown_pool, WindowPool) for _i, b, _pool in plan
    )
    if slowed:
        s95 = np.tile(summary["slowdown_p95"].to_numpy(dtype=float), (resamples, 1))
        s99 = np.tile(summary["slowdown_p99"].to_numpy(dtype=float), (resamples, 1))
    for j, (i, b, pool) in enumerate(plan):
        rate = np.array(rate_draws[j], dtype=float)
        if tok0[i] > 0:
            other[:, i] = other0[i] * (rate / tok0[i])
        tok[:, i] = rate
        windows_drawn = pool_draws[j]
        if pool is not None and windows_drawn is not None:
            weights = np.zeros((resamples, pool.groups), dtype=np.int64)
            rows = np.repeat(np.arange(resamples), pool.groups)
            np.add.at(weights, (rows, windows_drawn.ravel()), 1)
            p95[:, i], p99[:, i] = pool.quantiles_at(weights, (0.95, 0.99))
            slow = b.slowdown_pool
            # the same drawn windows; a slowdown pool short of a window (its rows' lengths
            # unknown) keeps its figure
            if slowed and isinstance(slow, WindowPool) and slow.groups == pool.groups:
                s95[:, i], s99[:, i] = slow.quantiles_at(weights, (0.95, 0.99))
    out = {column: other} if column != "output_tok_s" else {}
    if slowed:
        out |= {"slowdown_p95": s95, "slowdown_p99": s99}
    return {**out, "output_tok_s": tok, "e2e_p95_ms": p95, "e2e_p99_ms": p99}
