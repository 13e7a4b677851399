"""Which refine level narrows the capacity most, and when no level can narrow it enough.

Pure (no clock, no locust, no numpy). The inputs are the bracket the stage verdicts give, the
last good level ``L`` (the analysis's ``max_concurrency``) below the first level past the
capacity ``H``, and, once the analysis's fit over all stages has found a plateau
(:mod:`analysis.knee.fit`), its 90 % interval ``[lo, hi]`` on the capacity (``knee.json``'s
``capacity_low`` and ``capacity_high``).

**Where the capacity can still be**: ``[a, b] = [max(L, lo), min(H, hi)]`` with an interval that
overlaps the bracket, ``[L, H]`` without one. An interval above the bracket contradicts the stage
verdicts (a level judged past below it) and is ignored; one ending below ``L`` says the capacity
is ``L`` (nothing left to raise), and the sweep ignores it when it ends more than a user below
(:data:`MIN_USERS`; :func:`loadknee_locust.sweep.refine.next_step`): a level judged good there
contradicts it.

**Resolved** (:func:`answer_resolved`): ``b − L ≤ max(1 user, target % of L)``. The answer to
deploy is ``L``; no level left to test could raise it by more than the target. With an interval
that is usually reached long before the bracket itself is one user wide: an 8-slot server
bracketed 8 → 12 with the fit's interval 8.0–8.15 needs no 10 and 9. The interval resolves only
once it is **anchored** by a refine stage (``anchored``): straight after the grid no level lies
between ``L`` and ``H`` and the breakpoint between them is the fit's extrapolation, which a single
noisy stage can move by the whole gap (seen on 4 s stages: a 12-slot server's interval put below
8 after 8 → 16; a 20-slot server's 3 users low after 16 → 24). Until then the sweep bisects
(:func:`loadknee_locust.sweep.refine.next_step` passes no interval).

**The next level** (:func:`narrowing_level`): the untested whole level in ``(L, H)`` nearest the
middle of ``[a, b]`` (the lower one on a tie). Why the middle: a level ``u`` is judged good (the
capacity is at or above it, ``[u, b]`` remains) or past it (``[a, u)`` remains); with the capacity
spread evenly over ``[a, b]`` the width expected to remain, ``((b − u)² + (u − a)²) / (b − a)``,
is smallest there. Without an interval this is the bisection of the bracket the sweep always
did; with one it aims inside the interval, where bisection would take three stages to get to
within one user of a capacity the fit already places within one or two.

The interval only chooses levels and says when to stop: the answer is still the highest level the
analysis's stage rule judged good, so an interval that misses the truth costs stages or leaves
the answer lower than it could be, never above a level judged past the knee.
"""

from __future__ import annotations

from collections.abc import Iterable

#: the default target: the capacity known within this % of the last good level ...
TARGET_PCT = 10.0
#: ... or within this many users, whichever is wider
MIN_USERS = 1


def _span(low: int, high: int, interval: tuple[float, float] | None) -> tuple[float, float]:
    """``[a, b]``: where the capacity can still be (module docstring)."""
    if interval is not None:
        a, b = max(float(low), interval[0]), min(float(high), interval[1])
        if a <= b:
            return a, b
        if interval[1] < low:  # at most a user below a level judged good (the caller drops
            return float(low), interval[1]  # one further below): nothing left to raise
    return float(low), float(high)


def answer_resolved(
    low: int,
    high: int,
    interval: tuple[float, float] | None = None,
    target_pct: float = TARGET_PCT,
) -> bool:
    """True when no level in ``(low, high)`` can raise the answer ``low`` by more than the target
    (``max(1 user, target_pct % of low)``); ``interval`` narrows where the capacity can be."""
    _, b = _span(low, high, interval)
    return b - low <= max(MIN_USERS, target_pct / 100.0 * low)


def narrowing_level(
    low: int,
    high: int,
    interval: tuple[float, float] | None,
    tested: Iterable[int],
    target_pct: float = TARGET_PCT,
    *,
    anchored: bool = True,
) -> int | None:
    """The refine level to run next between ``low`` (good) and ``high`` (past the capacity), or
    None when resolved or every level between them was tested; ``anchored`` False: the interval
    picks the level but cannot resolve (no refine stage has been run yet)."""
    if answer_resolved(low, high, interval if anchored else None, target_pct):
        return None
    done = set(tested)
    candidates = [u for u in range(low + 1, high) if u not in done]
    if not candidates:
        return None
    a, b = _span(low, high, interval)
    middle = (a + b) / 2
    return min(candidates, key=lambda u: (abs(u - middle), u))
