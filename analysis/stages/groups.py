"""Rows grouped by stage once, and each group's exact percentiles from arrays.

Why: the record table takes thirteen percentiles of seven columns per stage. pandas'
``groupby(...).quantile`` sorts every column's whole length again (a lexsort of values and
groups, a fifth of a second a million rows, issue 43); here the rows are put in stage order once
and each stage's values are only partitioned around the rank wanted (``np.partition``: linear
time, not a sort) — or sorted, when several ranks are wanted: numpy's partition around several
ranks is its old introselect, slower than its vectorised sort (0.20 against 0.08 ms on 20,000
values), where around one rank it is the vectorised selection (0.03 ms). The value at a rank is
the same either way.

The arithmetic is pandas' (``groupby.quantile``, linear interpolation), so the figures are the
same to the last bit: of a group's ``n`` values (NaN left out), the value at rank ``int(q·(n-1))``
and, when ``q·(n-1)`` has a fraction, ``v + (next - v) · frac`` with the next rank's value.
``tests/analysis/stages/test_groups.py`` holds them to pandas' figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd


def rank_quantiles(values: np.ndarray, qs: Sequence[float]) -> list[float]:
    """pandas' linear quantiles of ``values`` (no NaN among them; NaN each when empty)."""
    n = len(values)
    if n == 0:
        return [math.nan] * len(qs)
    positions = [q * float(n - 1) for q in qs]
    ranks = [int(p) for p in positions]
    kth = sorted({*ranks, *(min(r + 1, n - 1) for r in ranks)})
    part = np.partition(values, kth[0]) if len(kth) == 1 else np.sort(values)
    out = []
    for position, rank in zip(positions, ranks, strict=True):
        frac = position % 1
        value = float(part[rank])
        out.append(value if frac == 0.0 else value + (float(part[rank + 1]) - value) * frac)
    return out


def median(values: np.ndarray) -> float:
    """``np.median`` of a 1-D float array, to the bit (NaN when it holds a NaN or nothing): the
    middle value, or the mean ``(a + b) / 2`` of the two middle ones, found by a sort. numpy's
    own median partitions around two or three ranks (it adds the last, to find NaNs), its slow
    path (the module docstring)."""
    n = len(values)
    if n == 0:
        return math.nan
    ordered = np.sort(values)  # NaN sorts last
    if math.isnan(ordered[-1]):
        return math.nan
    if n % 2:
        return float(ordered[n // 2])
    return (float(ordered[n // 2 - 1]) + float(ordered[n // 2])) / 2


class StageGroups:
    """Rows grouped by their key (a stage number; NaN keys left out), in key order."""

    def __init__(self, keys: np.ndarray) -> None:
        """``keys``: one per row (float; NaN: the row is in no group)."""
        codes, labels = pd.factorize(keys, sort=True)  # NaN gets -1
        #: the distinct keys, ascending
        self.labels: np.ndarray = np.asarray(labels)
        #: each row's group (its place in ``labels``), -1 for none
        self.codes: np.ndarray = codes
        # a group's rows together, in row order (16-bit codes sort by radix: linear time)
        small = codes.astype(np.int16) if len(labels) < 2**15 else codes
        order = np.argsort(small, kind="stable")
        self.order: np.ndarray = order[np.count_nonzero(codes < 0) :]
        sizes = np.bincount(codes[codes >= 0], minlength=len(labels))
        #: group g's rows are ``order[bounds[g]:bounds[g + 1]]``
        self.bounds: np.ndarray = np.concatenate(([0], np.cumsum(sizes)))

    def __len__(self) -> int:
        return len(self.labels)

    def counts(self, code: np.ndarray, kinds: int) -> np.ndarray:
        """Per group (row) and value of ``code`` (column, 0…``kinds``-1), how many rows."""
        keep = self.codes >= 0
        cells = self.codes[keep] * kinds + code[keep]
        return np.bincount(cells, minlength=len(self) * kinds).reshape(len(self), kinds)

    def quantiles(self, values: np.ndarray, qs: Sequence[float]) -> np.ndarray:
        """Per group (row) and ``q`` (column), pandas' linear quantile of its non-NaN
        ``values`` (one per row of the frame the groups were made from); NaN when none."""
        ordered = values[self.order]
        out = np.full((len(self), len(qs)), np.nan)
        for g in range(len(self)):
            part = ordered[self.bounds[g] : self.bounds[g + 1]]
            out[g] = rank_quantiles(part[~np.isnan(part)], qs)
        return out
