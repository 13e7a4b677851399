"""What the adaptive sweep runs next: refine between grid levels, go on, or stop after the knee.

Pure (no clock, no locust, no pandas). The judgement itself is not made here: it comes from the
analysis package's own knee rules, run over the stages finished so far (``python -m
analysis.live.answer``, the one entry point for live judgements: the web UI shows the same object's
per-stage verdicts), and reaches this module as a :class:`LiveVerdict`. One implementation of the
knee serves the live sweep and ``loadknee analyze``; this module only turns its answer into the
next level.

The rule (:func:`next_step`), after every finished stage:

1. **No limit yet** (no knee, no red line): the next level of the grid, or the end of the grid.
2. **A limit K after a last good level L** (the analysis's ``max_concurrency``, the level it would
   recommend): while the capacity is not known within ``refine_target_pct`` % of L (at least one
   user) and refinement stages are left, run the level that narrows it most as a ``refine``
   stage (:mod:`loadknee_locust.sweep.narrow`). Before the analysis's fit over all stages has a
   plateau that is the midpoint of the bracket ``L … K`` (bisection: the analysis's answer is
   monotone in what it sees, a level is good or past the knee, and each stage halves the
   bracket); once the fit gives its 90 % interval on the capacity, the level nearest the middle
   of the part of that interval inside the bracket, and the capacity counts as known once the
   interval's top lies within the target above L (an interval of a user or two inside an 8-user
   bracket: one stage where bisection took three); both only after at least one refine stage
   (before it the breakpoint between two grid levels is an extrapolation). Where the server's
   gauge named its slot count inside the bracket (the running maximum while requests waited),
   that level goes first, untested: it is the capacity if any level is. The interval never
   leaves the bracket: a level is still judged good or past by the stage rule, and the verdict
   is re-read after each refine stage, so a level judged good moves L up, one judged past the
   knee moves K down, and a knee that a later stage shows to be a dip (the analysis demotes it)
   sends the sweep back to the grid.
3. **The SLO boundary**, when the sweep was given latency targets (``--slo``): the same bisection
   between the SLO capacity and the lowest stage that breaks the targets, while that bracket is
   wide and at or below the knee (above the knee the knee binds first: pinning the SLO boundary
   there would not change the answer to deploy). The knee's bracket goes first; both share the
   refinement budget.
4. **Refined** (capacity known, or the refinement budget spent): grid levels go on until
   ``stop_after_knee`` tested levels lie above the knee, then the sweep stops
   (``knee_confirmed``). A level above the knee is what confirms it: the analysis demotes a
   "knee" that a later level out-serves (a dip), so one is worth running; the grid level that
   first showed the knee counts once refinement moved the knee below it, and so does every level
   past the top of the fit's interval (the fit only has a plateau once two levels lie past it,
   so a confident fit has already seen the levels a grid level more would add).
   A red line is not driven further: the sweep stops there once refined (``red_line``).
   ``stop_after_knee < 0`` never stops early (the full grid, as before).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from loadknee_locust.sweep.narrow import MIN_USERS, TARGET_PCT, answer_resolved, narrowing_level
from loadknee_locust.sweep.rateanswer import RateAnswer, opt_float


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
    """The analysis's answer over the stages so far (from ``python -m analysis.live.answer``).

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
    capacity_low: float | None = None  # the fit's 90 % interval on the capacity (a plateau
    capacity_high: float | None = None  # found), None before it has one
    # the one answer so far (analysis.report.answer_view, the names of docs/method.md): the
    # first stage past the capacity, its kind ("knee" | "red line") and the capacity in words
    past_users: int | None = None
    past: str | None = None
    capacity_words: str = ""
    #: the report's "cannot tell: …" line over the stages so far ("" where they answer): the web
    #: UI shows it instead of the provisional capacity
    cannot_tell: str = ""
    rates: RateAnswer | None = None  # an open-loop rate run: offered vs served, the rate knee
    #: the server's own running maximum while requests waited (its gauge: the knee's
    #: ``server_slots``), None without one: the slot count, so the capacity is at most that
    server_slots: int | None = None

    @classmethod
    def from_json(cls, answer: Mapping[str, Any]) -> LiveVerdict:
        """From ``analysis.live.answer``'s JSON object (ValueError, TypeError or KeyError if
        malformed)."""
        view = answer.get("answer") or {}
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
            capacity_low=opt_float(answer.get("capacity_low")),
            capacity_high=opt_float(answer.get("capacity_high")),
            past_users=_opt_int(view.get("first_past_capacity_users")),
            past=None
            if view.get("first_past_capacity") is None
            else str(view["first_past_capacity"]),
            capacity_words=str(answer.get("capacity_words") or ""),
            cannot_tell=str(answer.get("cannot_tell") or ""),
            rates=RateAnswer.from_json(answer["rates"]) if answer.get("rates") else None,
            server_slots=_opt_int(answer.get("server_slots")),
        )

    @property
    def limit_users(self) -> int | None:
        """The first level past the capacity: the knee, or a lower red line."""
        found = [u for u in (self.knee_users, self.red_line_users) if u is not None]
        return min(found) if found else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """The fit's 90 % interval on the capacity, when it has one."""
        if self.capacity_low is None or self.capacity_high is None:
            return None
        return self.capacity_low, self.capacity_high


@dataclass(frozen=True)
class NextStep:
    """What to run next: a ``refine`` level, a grid level, or stop (with the reason)."""

    action: Literal["refine", "grid", "stop"]
    users: int = 0
    reason: Literal["knee_confirmed", "red_line", "grid_done"] = "grid_done"


def resolved(low: int, high: int, target_pct: float = TARGET_PCT) -> bool:
    """True when the bracket ``low < c ≤ high`` is narrow: ``high − low ≤ max(1, 10 % of low)``
    (``target_pct``)."""
    return answer_resolved(low, high, None, target_pct)


def next_step(
    verdict: LiveVerdict | None,
    *,
    tested: Iterable[int],
    grid_left: Iterable[int],
    refine_left: int,
    stop_after_knee: int,
    target_pct: float = TARGET_PCT,
    refined: int = 0,
) -> NextStep:
    """The next stage after a finished one (see the module docstring for the rule).

    ``verdict`` None means the live judgement failed: the plain grid goes on. ``tested`` are the
    levels already run (grid and refine), ``grid_left`` the grid levels not yet run (ascending),
    ``refine_left`` how many refine stages the budget still allows, ``target_pct`` how closely
    the capacity must be known (``--llm-refine-target-pct``), ``refined`` how many refine stages
    were run (the fit's interval resolves, and confirms the knee, only after one).
    """
    done = set(tested)
    left = sorted(u for u in grid_left if u not in done)
    following = NextStep("grid", left[0]) if left else NextStep("stop")
    if verdict is None:
        return following
    limit = verdict.limit_users
    low = verdict.max_concurrency
    interval = verdict.interval
    if interval is not None and low is not None and interval[1] < low - MIN_USERS:
        interval = None  # well below a level judged good: the stage verdicts say otherwise
    if limit is not None and low is not None and low < limit and refine_left > 0:
        # a tested level between L and the knee that the analysis did not make L is past the
        # capacity too (a level the server's own slot count caps, or a dip): the bracket's top
        high = min((u for u in done if low < u < limit), default=limit)
        slots = verdict.server_slots
        if slots is not None and low < slots < high and slots not in done:
            # the server's gauge names its slot count inside the bracket: that level is the
            # capacity if any is, so it goes first, whatever the fit's interval says (the fit
            # reads stages a busy machine may have starved: a 10-slot server's 9-9 left 10
            # untested and the answer at 8)
            return NextStep("refine", slots)
        # before a refine stage anchors it the interval is the fit's extrapolation between two
        # grid levels (seen 3 users low on a 20-slot server): bisect instead
        aim = interval if refined > 0 else None
        level = narrowing_level(low, high, aim, done, target_pct)
        if level is not None:
            return NextStep("refine", level)
    slo_mid = _slo_refine_level(verdict, limit, done, target_pct) if refine_left > 0 else None
    if slo_mid is not None:
        return NextStep("refine", slo_mid)
    if limit is None:
        return following
    red = verdict.red_line_users is not None and verdict.red_line_users == limit
    if red:
        return NextStep("stop", reason="red_line")
    if stop_after_knee < 0 or not left:
        return following
    # levels past the knee, or past the fit's interval and above the last good level
    top = interval[1] if interval is not None and refined > 0 else limit
    floor = min(limit, max(top, low if low is not None else top))
    above = sum(1 for u in done if u > floor)
    return NextStep("stop", reason="knee_confirmed") if above >= stop_after_knee else following


def _slo_refine_level(
    verdict: LiveVerdict, limit: int | None, done: set[int], target_pct: float
) -> int | None:
    """The level halfway between the SLO capacity and the first stage that breaks the SLOs,
    while that bracket is wide and lies at or below the knee (above it the knee binds first and
    the SLO boundary does not change the answer to deploy); None when there is nothing to pin."""
    good, bad = verdict.slo_capacity, verdict.slo_break_users
    if good is None or bad is None or good >= bad or (limit is not None and bad > limit):
        return None
    mid = (good + bad) // 2
    if resolved(good, bad, target_pct) or not good < mid < bad or mid in done:
        return None
    return mid


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)
