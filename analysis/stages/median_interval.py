"""The median's distribution-free interval: two order statistics of the stage's own requests.

Why: the throughput and tail intervals resample time windows (:mod:`analysis.stages.intervals`),
and a stage shorter than five of its requests' spans has none: its flattening is then read on
point figures and cannot clear the noise. The median latency needs no windows: the number of a
stage's requests below its true median is binomial(n, ½) whatever the distribution, so two
ranks bound it at 95 % (the sign-test interval). The knee reads it where a noisy knee needs
a second measurement (:func:`analysis.knee.noisy_stages.knee_clears_noise`): by Little's law a
closed loop's users over their median latency is its throughput up to one constant, and one slow
window moves a median little where it moves the window's token count a lot.

A stage's requests are not independent (a stalled server slows every request in flight at
once), so the interval is narrower than the truth where stalls are common; it is only ever used
beside a point figure that already says the same (a flattening and a departed tail).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

#: above this many requests the ranks come from the normal approximation (exact below)
EXACT_UP_TO = 1000


def median_ranks(n: int, level: float = 0.95) -> tuple[int, int] | None:
    """The 1-based ranks ``(j, n - j + 1)`` whose order statistics bound the median with at
    least ``level`` coverage: ``j`` the largest with P(Binomial(n, ½) < j) ≤ (1 - level) / 2.
    None where even the extremes do not reach that coverage (n < 6 at 95 %)."""
    if n < 1:
        return None
    tail = (1.0 - level) / 2.0
    if n > EXACT_UP_TO:
        z = NormalDist().inv_cdf(1.0 - tail)
        j = math.floor(n / 2.0 - z * math.sqrt(n) / 2.0)
    else:
        total, below, j = 2**n, 0, 0
        while j < n:  # below: how many outcomes put fewer than j + 1 requests under the median
            below += math.comb(n, j)
            if below > tail * total:
                break
            j += 1
    if j < 1:
        return None
    return j, n - j + 1


def median_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float] | None:
    """The median's interval from ``values`` (NaN left out): the order statistics at
    :func:`median_ranks`; None for too few values."""
    finite = np.sort(values[~np.isnan(values)])
    ranks = median_ranks(len(finite), level)
    if ranks is None:
        return None
    low, high = ranks
    return float(finite[low - 1]), float(finite[high - 1])
