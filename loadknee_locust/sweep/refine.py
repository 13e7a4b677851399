"""What the adaptive sweep runs next: refine between grid levels, go on, or stop after the knee.

Pure (no clock, no locust, no pandas). The judgement itself is not made here: it comes from the
analysis package's own knee rules, run over the stages finished so far (``python -m
analysis.knee.live``, the one entry point for live judgements: the web UI shows the same object's
per-stage verdicts), and reaches this module as a :class:`LiveVerdict`. One implementation of the
knee serves the live sweep and ``loadknee analyze``; this module only turns its answer into the
next level.

The rule (:func:`next_step`), after every finished stage:

1. **No limit yet** (no knee, no red line): the next level of the grid, or the end of the grid.
2. **A limit K after a last good level L** (the analysis's ``max_concurrency``, the level it would
   recommend): while the bracket ``K − L`` is wider than ``max(1, 10 % of L)`` and refinement
   stages are left, run the midpoint ``(L + K) // 2`` as a ``refine`` stage. Bisection: the
   analysis's answer is monotone in what it sees (a level is good or past the knee), each stage
   halves the bracket, and the default grid's widest bracket (8 → 16, a gap of 8 users) needs 3
   stages to reach 1 user. A model-based guess (interpolating the throughput curve) could need
   fewer, but a noisy stage can throw it far outside the bracket; bisection never leaves it.
   The verdict is re-read after each refine stage, so a midpoint judged good moves L up, one
   judged past the knee moves K down, and a knee that a later stage shows to be a dip (the
   analysis demotes it) sends the sweep back to the grid.
3. **The SLO boundary**, when the sweep was given latency targets (``--slo``): the same bisection
   between the SLO capacity and the lowest stage that breaks the targets, while that bracket is
   wide and at or below the knee (above the knee the knee binds first: pinning the SLO boundary
   there would not change the answer to deploy). The knee's bracket goes first; both share the
   refinement budget.
4. **Refined** (bracket narrow, or the refinement budget spent): grid levels go on until
   ``stop_after_knee`` tested levels lie above the knee, then the sweep stops
   (``knee_confirmed``). A level above the knee is what confirms it: the analysis demotes a
   "knee" that a later level out-serves (a dip), so one is worth running; the grid level that
   first showed the knee counts once refinement moved the knee below it.
   A red line is not driven further: the sweep stops there once refined (``red_line``).
   ``stop_after_knee < 0`` never stops early (the full grid, as before).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

#: a bracket this narrow (users) is resolved whatever L is
MIN_BRACKET_USERS = 1
#: ... and so is one within this fraction of L
BRACKET_FRACTION = 0.10


@dataclass(frozen=True)
class StageJudgement:
    """One judged stage of a :class:`LiveVerdict`: the analysis's verdict and its reasons."""

    stage: int
    users: int
    verdict: str  # comfortable | critical | knee | red line
    reasons: tuple[str, ...] = ()
    trusted: bool = True  # False when the load generator was the limit
    noisy: bool = False  # True when its interval was too wide (or its window too short) to judge


@dataclass(frozen=True)
class LiveVerdict:
    """The analysis's answer over the stages so far (from ``python -m analysis.knee.live``).

    The sweep reads the first three fields; the web UI shows ``stages`` (provisional verdicts),
    ``knee_stage`` and ``summary``: one judgement per finished stage serves both.
    """

    knee_users: int | None
    red_line_users: int | None
    max_concurrency: int | None
    knee_stage: int | None = None
    summary: str = ""
    stages: tuple[StageJudgement, ...] = ()
    slo_capacity: int | None = None  # highest concurrency meeting the sweep's SLOs (--slo)
    slo_break_users: int | None = None  # the lowest stage that breaks them

    @classmethod
    def from_json(cls, answer: Mapping[str, Any]) -> LiveVerdict:
        """From ``analysis.knee.live``'s JSON object (ValueError, TypeError or KeyError if
        malformed)."""
        stages = tuple(
            StageJudgement(
                stage=int(s["stage"]),
                users=int(s["users"]),
                verdict=str(s["verdict"]),
                reasons=tuple(str(r) for r in s.get("reasons") or ()),
                trusted=bool(s.get("trusted", True)),
                noisy=bool(s.get("noisy", False)),
            )
            for s in answer.get("stages") or ()
        )
        return cls(
            knee_users=_opt_int(answer.get("knee_users")),
            red_line_users=_opt_int(answer.get("red_line_users")),
            max_concurrency=_opt_int(answer.get("max_concurrency")),
            knee_stage=_opt_int(answer.get("knee_stage")),
            summary=str(answer.get("summary") or ""),
            stages=stages,
            slo_capacity=_opt_int(answer.get("slo_capacity")),
            slo_break_users=_opt_int(answer.get("slo_break_users")),
        )

    @property
    def limit_users(self) -> int | None:
        """The first level past the capacity: the knee, or a lower red line."""
        found = [u for u in (self.knee_users, self.red_line_users) if u is not None]
        return min(found) if found else None


@dataclass(frozen=True)
class NextStep:
    """What to run next: a ``refine`` level, a grid level, or stop (with the reason)."""

    action: Literal["refine", "grid", "stop"]
    users: int = 0
    reason: Literal["knee_confirmed", "red_line", "grid_done"] = "grid_done"


def resolved(low: int, high: int) -> bool:
    """True when the bracket ``low < c ≤ high`` is narrow: ``high − low ≤ max(1, 10 % of low)``."""
    return high - low <= max(MIN_BRACKET_USERS, BRACKET_FRACTION * low)


def next_step(
    verdict: LiveVerdict | None,
    *,
    tested: Iterable[int],
    grid_left: Iterable[int],
    refine_left: int,
    stop_after_knee: int,
) -> NextStep:
    """The next stage after a finished one (see the module docstring for the rule).

    ``verdict`` None means the live judgement failed: the plain grid goes on. ``tested`` are the
    levels already run (grid and refine), ``grid_left`` the grid levels not yet run (ascending),
    ``refine_left`` how many refine stages the budget still allows.
    """
    done = set(tested)
    left = sorted(u for u in grid_left if u not in done)
    following = NextStep("grid", left[0]) if left else NextStep("stop")
    if verdict is None:
        return following
    limit = verdict.limit_users
    low = verdict.max_concurrency
    if limit is not None and low is not None and low < limit and refine_left > 0:
        # a tested level between L and the knee that the analysis did not make L is past the
        # capacity too (a level the server's own slot count caps, or a dip): the bracket's top
        high = min((u for u in done if low < u < limit), default=limit)
        mid = (low + high) // 2
        if not resolved(low, high) and low < mid < high and mid not in done:
            return NextStep("refine", mid)
    slo_mid = _slo_refine_level(verdict, limit, done) if refine_left > 0 else None
    if slo_mid is not None:
        return NextStep("refine", slo_mid)
    if limit is None:
        return following
    red = verdict.red_line_users is not None and verdict.red_line_users == limit
    if red:
        return NextStep("stop", reason="red_line")
    if stop_after_knee < 0 or not left:
        return following
    above = sum(1 for u in done if u > limit)
    return NextStep("stop", reason="knee_confirmed") if above >= stop_after_knee else following


def _slo_refine_level(verdict: LiveVerdict, limit: int | None, done: set[int]) -> int | None:
    """The level halfway between the SLO capacity and the first stage that breaks the SLOs,
    while that bracket is wide and lies at or below the knee (above it the knee binds first and
    the SLO boundary does not change the answer to deploy); None when there is nothing to pin."""
    good, bad = verdict.slo_capacity, verdict.slo_break_users
    if good is None or bad is None or good >= bad or (limit is not None and bad > limit):
        return None
    mid = (good + bad) // 2
    if resolved(good, bad) or not good < mid < bad or mid in done:
        return None
    return mid


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)
