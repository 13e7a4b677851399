"""The knee judged on all stages at once: a rise-then-plateau fit of throughput over users.

The adjacent-stage rule (:func:`analysis.knee.signals.throughput_signals`) divides the difference
of two stages' throughput by their difference in users. Refinement brings stages within one or
two users of each other, where that quotient is the difference of two noisy rates over one user:
more stages near the knee make it blur. This fit uses every level instead, so added stages
sharpen it.

Model: throughput ``X(c) = a + b·m + e·m² + d·max(c − K, 0)`` with ``m = min(c, K)`` — a
concave rise up to the breakpoint ``K`` (each added user brings a little less, as a batching
server's steps slow with the batch; a straight line, ``e = 0``, below 6 levels) continued with a
second slope ``d`` after it (continuous at ``K``). A straight rise fitted to the concave one put
the 8-slot simulator's breakpoint at 7.4. For each
candidate ``K`` on a 0.05-user grid between the second-lowest and second-highest level the three
coefficients come from weighted least squares (each stage weighted by the inverse square of its
throughput interval's half-width, so a noisy stage counts less; equal weights without intervals);
``K`` is the candidate with the smallest weighted squared error.

It is a knee only when the plateau is flat, seen by at least two levels past the interval's
upper end (one would be the adjacent-stage rule again), with at least 5 levels in all: ``d``
below ``flat_gain_ratio`` of one user's rate (in 95 % of the resamples) while the rise's slope
where it meets the plateau (``b + 2eK``) is above it (the rise paid, the plateau does not).
The breakpoint's interval comes from resampling: each stage's throughput drawn from its own
interval (normal, its 95 % half-width / 1.96; stages without one use the fit's residual
spread), the fit repeated ``resamples`` times (seeded); the 5th and 95th percentiles of ``K``
are the 90 % interval. The capacity is said in whole users: "capacity 8 users, 90 % interval
7–8".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.stages.levels import level_rows
from loadknee_core.knee_params import DEFAULTS

#: resamples for the breakpoint's interval
RESAMPLES = 200
#: grid step of the candidate breakpoints (users)
GRID_STEP = 0.05
#: fewer served levels than this: no fit
MIN_LEVELS = 5
#: a plateau must be seen by this many levels past the breakpoint (one is the adjacent rule)
PLATEAU_LEVELS = 2
#: from this many levels the rise is fitted as a concave parabola rather than a line
QUADRATIC_LEVELS = 6


@dataclass(frozen=True)
class KneeFit:
    """The fitted breakpoint, its interval and the two slopes (per user, as × one user's rate)."""

    capacity: float  # the breakpoint K (users)
    low: float  # 5th percentile of K over the resamples
    high: float  # 95th percentile
    rise: float  # b / x1
    plateau: float  # d / x1
    plateau_high: float  # 95th percentile of d / x1 over the resamples
    flat: bool  # the plateau is flat: a knee
    levels: int  # stages in the fit
    flat_gain_ratio: float  # the plateau is flat below this gain per user (× one user's rate)


class Levels:
    """The levels a fit runs over, taken once from a record table: which rows, in which order,
    at which users, with which weights. A table's throughput column changes the fit's points but
    none of this (:mod:`analysis.knee.confidence` fits 200 resampled columns on one ``Levels``),
    so the grid's normal equations are solved once, not once per fit."""

    def __init__(self, summary: pd.DataFrame, column: str) -> None:
        steps = _levels(summary.reset_index(drop=True), column)
        #: per level row (users order, as ``sort_values`` left them), its row in ``summary``
        self.positions = steps.index.to_numpy()
        users = steps["target_users"].to_numpy(dtype=float)
        self.c = np.sort(np.unique(users))
        #: per level, the positions (into ``positions``) of its rows, in row order
        self.members = [np.flatnonzero(users == level) for level in self.c]
        self.labels = users
        self.short = all(len(rows) <= 2 for rows in self.members)
        pct = (
            steps["output_tok_s_hw_pct"].to_numpy(dtype=float)
            if "output_tok_s_hw_pct" in steps
            else np.full(len(steps), math.nan)
        )
        self.pct = self.mean(pct)
        self.grid = (
            np.arange(self.c[1], self.c[-2] + GRID_STEP / 2, GRID_STEP)
            if len(self.c) >= 2
            else np.array([])
        )
        self._solved: dict[bytes, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def mean(self, values: np.ndarray) -> np.ndarray:
        """Per level, the mean of its rows' ``values`` (NaN skipped) as pandas' grouped mean gives
        it. A level of one or two rows is its value or ``(a + b) / 2`` in every pandas kernel, so
        that case skips pandas (the knee's confidence fits 200 tables); more rows ask pandas."""
        if self.short:
            out = np.full(len(self.c), math.nan)
            for i, rows in enumerate(self.members):
                held = [v for v in values[rows].tolist() if not math.isnan(v)]
                if len(held) == 1:
                    out[i] = held[0]
                elif held:
                    out[i] = (held[0] + held[1]) / 2
            return out
        grouped = pd.Series(values).groupby(self.labels).mean()
        return grouped.reindex(self.c).to_numpy(dtype=float)

    def solved(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The design, its weighted copy and the inverse normal matrices of every candidate
        breakpoint for the weights ``w`` (computed once per weights)."""
        key = w.tobytes()
        if key not in self._solved:
            c, grid = self.c, self.grid
            rise = np.minimum(c[None, :], grid[:, None])
            ones = np.ones((len(grid), len(c)))
            columns = [ones, rise, np.maximum(c[None, :] - grid[:, None], 0.0)]
            if len(c) >= QUADRATIC_LEVELS:  # a concave rise: each added user brings a little less
                columns.insert(2, rise**2)
            design = np.stack(columns, axis=2)  # G × n × p
            weighted = design * w[None, :, None]
            normal = np.einsum("gni,gnj->gij", weighted, design)
            self._solved[key] = (design, weighted, np.linalg.pinv(normal))  # (G × 3 × 3)
        return self._solved[key]

    def fit(
        self,
        values: np.ndarray,
        x1: float | None,
        *,
        flat_gain_ratio: float = DEFAULTS.flat_gain_ratio,
        resamples: int = RESAMPLES,
        seed: int = 0,
    ) -> KneeFit | None:
        """The rise-then-plateau fit over the step stages of the table, with its throughput
        column given as ``values`` (one per row of the table the levels were taken from); None:
        too few levels, or no single-user rate to judge the slopes by. One point per level:
        repeated levels (a refine stage on a grid level) are averaged."""
        c = self.c
        if len(c) < MIN_LEVELS or not x1 or x1 <= 0:
            return None
        x = self.mean(values[self.positions])
        sd = np.abs(x) * self.pct / 100.0 / 1.96
        if len(self.grid) == 0:
            return None
        known = np.isfinite(sd) & (sd > 0)
        floor = max(
            float(np.median(sd[known])) if known.any() else 0.0, 1e-6 * float(np.abs(x).max())
        )
        w = np.where(known, 1.0 / np.maximum(sd, floor) ** 2, 1.0 / floor**2)
        if not known.any():
            w = np.ones_like(x)
        k, _a, b, d = (float(v) for v in self._fit(x[None, :], w)[0])
        if resamples > 0:
            draw_sd = np.where(known, sd, _residual(c, x, k))
            rng = np.random.default_rng(seed)
            noisy = x[None, :] + rng.standard_normal((resamples, len(c))) * draw_sd[None, :]
            fits = self._fit(noisy, w)
            low, high = (float(v) for v in np.percentile(fits[:, 0], [5, 95]))
            plateau_high = float(np.percentile(fits[:, 3] / x1, 95))
        else:  # the knee's own resampling (analysis.knee.confidence) is the noise
            low = high = k
            plateau_high = d / x1
        rise, plateau = b / x1, d / x1
        plateau_high = max(plateau_high, plateau)
        beyond = int((c > high).sum())
        flat = (
            plateau_high < flat_gain_ratio and rise >= flat_gain_ratio and beyond >= PLATEAU_LEVELS
        )
        return KneeFit(
            capacity=k,
            low=low,
            high=high,
            rise=rise,
            plateau=plateau,
            plateau_high=plateau_high,
            flat=flat,
            levels=len(c),
            flat_gain_ratio=flat_gain_ratio,
        )

    def _fit(self, xs: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Per row of ``xs`` (R × levels): (K, a, b, d) minimising the weighted squared error
        over the candidate breakpoints (the normal equations of every candidate at once)."""
        design, weighted, inverse = self.solved(w)
        grid = self.grid
        rhs = np.einsum("gni,rn->rgi", weighted, xs)  # (R × G × 3)
        coef = np.einsum("gij,rgj->rgi", inverse, rhs)
        fitted = np.einsum("gni,rgi->rgn", design, coef)
        sse = (((fitted - xs[:, None, :]) ** 2) * w[None, None, :]).sum(axis=2)  # (R × G)
        best = sse.argmin(axis=1)
        rows = np.arange(len(xs))
        chosen = coef[rows, best]
        k = grid[best]
        if chosen.shape[1] == 4:  # (K, a, slope at K, d): the rise's slope where it meets plateau
            return np.column_stack(
                [k, chosen[:, 0], chosen[:, 1] + 2 * chosen[:, 2] * k, chosen[:, 3]]
            )
        return np.column_stack([k, chosen])


def _residual(c: np.ndarray, x: np.ndarray, k: float) -> float:
    """The unweighted RMS residual of the fit at breakpoint ``k`` (the spread drawn for stages
    without an interval of their own)."""
    rise = np.minimum(c, k)
    columns = [np.ones_like(c), rise, np.maximum(c - k, 0.0)]
    if len(c) >= QUADRATIC_LEVELS:
        columns.insert(2, rise**2)
    design = np.column_stack(columns)
    coef, *_ = np.linalg.lstsq(design, x, rcond=None)
    dof = max(1, len(c) - design.shape[1] - 1)
    return float(np.sqrt((((design @ coef) - x) ** 2).sum() / dof))


def _levels(summary: pd.DataFrame, column: str) -> pd.DataFrame:
    steps = level_rows(summary)
    steps = steps[steps["ok"] > 0]
    steps = steps[steps[column].notna() & steps["target_users"].notna()]
    return steps.sort_values("target_users")


def whole(value: float) -> int:
    """A breakpoint in whole users (nearest, at least 1)."""
    return max(1, math.floor(value + 0.5))
