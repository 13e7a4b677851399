"""Intervals for one stage's throughput and tail percentile, by batch means over time windows.

Stdlib only (no numpy, pandas, locust or gevent), so the Locust process (``--stage-seconds auto``
decides live when a stage has measured enough) and :mod:`analysis` (the record table, the knee's
noise rules) compute the same interval from the same raw facts.

Why batch means, and how
------------------------
A closed-loop stage is not a sample of independent requests: each user sends its next request
when the previous one ends, so a slow spell (a long prompt, a preemption, a neighbour on the CPU)
slows every request in flight and the ones queued behind them. A plain standard error over
requests treats hundreds of correlated rows as independent and gives an interval several times
too narrow. Batch means (Law & Kelton, *Simulation Modeling and Analysis*, ch. 9) cut the
measured window ``[start_s, end_s]`` into ``batches`` consecutive windows of equal length; each
window's rate is one observation; windows at least one request long are nearly independent, so a
Student-t interval on their mean is honest:

1. **Attribution.** A request's tokens are spread evenly over its generation span (``starts_s``
   to ``ends_s``; from its first token when the caller passes that as the start), and each window
   counts the part inside it. Without ``starts_s`` a request counts wholly at its end. With spans,
   the mean of the window rates equals the stage's rate (tokens inside the window / its length),
   so the interval is centred on the record table's own figure.
2. **Number of batches.** ``batches`` = 10 by default: with fewer the t quantile grows fast
   (t(0.975, 4) = 2.78 against 2.26 at 9 degrees of freedom); with more, each window holds fewer
   requests and neighbouring windows correlate. A window shorter than the median request span
   would split one request's tokens over neighbours and make them correlated, so the count drops
   until each window is at least that long.
3. **Minimum data.** At least :data:`MIN_BATCHES` (5) windows, and (for the tail) at least
   :data:`MIN_TAIL_VALUES` values with ``1/(1-q)`` of them per percentile so the percentile is
   not just the maximum. Below that the functions return ``None``: "cannot tell", never a fake
   interval.
4. **Throughput.** ``mean ± t(1 - (1-level)/2, B-1) · s / √B`` over the B window rates; the
   Student-t because B is small and the window rates (sums of many requests) are near normal.
5. **Tail percentile.** A percentile is not a mean of per-window percentiles (a window of 6
   requests has no P95), so its interval resamples whole windows with replacement (a block
   bootstrap whose blocks are the batch windows, keeping each window's correlated requests
   together), pools their values and takes the percentile; the interval is the
   ``(1-level)/2`` and ``1-(1-level)/2`` quantiles of ``resamples`` such percentiles (seeded:
   the same data gives the same interval).

The half-width shrinks as 1/√T (the window rates' variance falls with their length), so
:func:`seconds_needed` says how long a stage would need to reach a target width.
"""

from __future__ import annotations

import functools
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: fewest batch windows for an interval (4 degrees of freedom)
MIN_BATCHES = 5
#: fewest values for a tail-percentile interval
MIN_TAIL_VALUES = 20


@dataclass(frozen=True)
class Interval:
    """A two-sided interval around ``mean`` (the point estimate) at the asked level."""

    mean: float
    low: float
    high: float
    half_width_pct: float  # (high - low) / 2 / |mean| * 100; inf when the mean is 0
    n: int  # values (requests) behind it
    batches: int  # time windows it was computed from


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: int) -> float:
    """The Student-t quantile ``t(p, df)`` (``0 < p < 1``), by bisection on the exact CDF.
    Remembered: every interval asks for the same few (0.975 at 4…9 degrees of freedom), and the
    bisection costs ~1 ms (30 intervals were 24 ms of summarising a 200k-row run)."""
    if not 0.0 < p < 1.0 or df < 1:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df >= 1, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if _t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def _t_cdf(t: float, df: int) -> float:
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2.0, 0.5, x)
    return 1.0 - tail if t >= 0 else tail


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b) (continued fraction, Numerical Recipes 6.4)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(ln_front + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _betacf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def batch_count(
    start_s: float,
    end_s: float,
    *,
    starts_s: Sequence[float] | None = None,
    ends_s: Sequence[float] | None = None,
    batches: int = 10,
) -> int:
    """How many windows the window ``[start_s, end_s]`` holds: ``batches``, fewer when a window
    would be shorter than the median request span (``ends_s - starts_s``)."""
    length = end_s - start_s
    if not length > 0 or batches < 1:
        return 0
    if starts_s is not None and ends_s is not None and len(ends_s):
        span = statistics.median(max(0.0, e - s) for s, e in zip(starts_s, ends_s, strict=True))
        if span > 0:
            return max(0, min(batches, int(length / span)))
    return batches


def batch_rates(
    ends_s: Sequence[float],
    amounts: Sequence[float],
    start_s: float,
    end_s: float,
    *,
    starts_s: Sequence[float] | None = None,
    batches: int = 10,
) -> list[float] | None:
    """Per window, the amount (tokens, requests) inside it per second; None below MIN_BATCHES."""
    count = batch_count(start_s, end_s, starts_s=starts_s, ends_s=ends_s, batches=batches)
    if count < MIN_BATCHES:
        return None
    width = (end_s - start_s) / count
    sums = [0.0] * count
    for i, (end, amount) in enumerate(zip(ends_s, amounts, strict=True)):
        begin = end if starts_s is None else min(starts_s[i], end)
        if begin == end:  # a point: counted in the window that holds it
            if start_s <= end <= end_s:
                sums[min(count - 1, int((end - start_s) / width))] += amount
            continue
        lo, hi = max(begin, start_s), min(end, end_s)
        if hi <= lo:
            continue
        per_s = amount / (end - begin)
        first, last = int((lo - start_s) / width), min(count - 1, int((hi - start_s) / width))
        for k in range(first, last + 1):
            w_lo, w_hi = start_s + k * width, start_s + (k + 1) * width
            overlap = min(hi, w_hi) - max(lo, w_lo)
            if overlap > 0:
                sums[k] += per_s * overlap
    return [s / width for s in sums]


def mean_interval(values: Sequence[float], *, n: int, level: float = 0.95) -> Interval | None:
    """Student-t interval on the mean of ``values`` (batch means); None below MIN_BATCHES."""
    b = len(values)
    if b < MIN_BATCHES:
        return None
    mean = statistics.fmean(values)
    half = t_quantile(1.0 - (1.0 - level) / 2.0, b - 1) * statistics.stdev(values) / math.sqrt(b)
    return Interval(mean, mean - half, mean + half, _half_pct(mean, half), n, b)


def throughput_interval(
    ends_s: Sequence[float],
    tokens: Sequence[float],
    start_s: float,
    end_s: float,
    *,
    starts_s: Sequence[float] | None = None,
    batches: int = 10,
    level: float = 0.95,
) -> Interval | None:
    """Interval for tokens (or requests, with amounts of 1) per second over ``[start_s, end_s]``.

    ``ends_s``/``tokens`` (and ``starts_s`` when given: the start of each request's generation)
    are the served requests, in any order. None when the window holds fewer than MIN_BATCHES
    windows of at least one median request span each.
    """
    rates = batch_rates(ends_s, tokens, start_s, end_s, starts_s=starts_s, batches=batches)
    if rates is None:
        return None
    n = sum(1 for e in ends_s if start_s <= e <= end_s)
    return mean_interval(rates, n=n, level=level)


def batch_groups(
    ends_s: Sequence[float],
    values: Sequence[float],
    start_s: float,
    end_s: float,
    *,
    batches: int,
) -> list[list[float]]:
    """``values`` grouped by the window their request ended in (requests outside are dropped)."""
    groups: list[list[float]] = [[] for _ in range(max(batches, 0))]
    if batches < 1 or not end_s > start_s:
        return groups
    width = (end_s - start_s) / batches
    for end, value in zip(ends_s, values, strict=True):
        if start_s <= end <= end_s and not math.isnan(value):
            groups[min(batches - 1, int((end - start_s) / width))].append(value)
    return groups


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default method) of non-empty ``values``."""
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def tail_interval(
    ends_s: Sequence[float],
    values: Sequence[float],
    start_s: float,
    end_s: float,
    *,
    q: float = 0.95,
    starts_s: Sequence[float] | None = None,
    batches: int = 10,
    level: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> Interval | None:
    """Interval for the ``q`` percentile of ``values`` (e.g. e2e ms), by resampling windows.

    ``mean`` is the percentile of all values in the window (the record table's figure). None
    when fewer than MIN_TAIL_VALUES (or ``1/(1-q)``) values, or fewer than MIN_BATCHES windows
    hold any.
    """
    count = batch_count(start_s, end_s, starts_s=starts_s, ends_s=ends_s, batches=batches)
    groups = [g for g in batch_groups(ends_s, values, start_s, end_s, batches=count) if g]
    pooled = [v for g in groups for v in g]
    if len(groups) < MIN_BATCHES or len(pooled) < max(MIN_TAIL_VALUES, math.ceil(1 / (1 - q))):
        return None
    rng = random.Random(seed)
    draws = sorted(
        quantile([v for g in rng.choices(groups, k=len(groups)) for v in g], q)
        for _ in range(resamples)
    )
    alpha = (1.0 - level) / 2.0
    point = quantile(pooled, q)
    low, high = quantile(draws, alpha), quantile(draws, 1.0 - alpha)
    low, high = min(low, point), max(high, point)
    return Interval(
        point, low, high, _half_pct(point, (high - low) / 2.0), len(pooled), len(groups)
    )


def seconds_needed(interval: Interval, window_s: float, *, target_pct: float) -> float:
    """Window length at which ``interval``'s half-width would reach ``target_pct`` (1/√T)."""
    if interval.half_width_pct <= target_pct:
        return window_s
    if math.isinf(interval.half_width_pct):
        return math.inf
    return window_s * (interval.half_width_pct / target_pct) ** 2


def _half_pct(mean: float, half: float) -> float:
    if mean == 0:
        return 0.0 if half == 0 else math.inf
    return abs(half / mean) * 100.0
