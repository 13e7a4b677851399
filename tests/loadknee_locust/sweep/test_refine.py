"""The adaptive sweep as pure rules: bisection brackets, early stop, fallback (no sleeping)."""

from __future__ import annotations

import pytest

from loadknee_locust.sweep.refine import LiveVerdict, NextStep, next_step, resolved
from loadknee_locust.sweep.schedule import PENDING, Schedule, SchedulePlan

GRID = (1, 2, 4, 8, 16, 24, 32, 48, 64)


def verdict(
    knee: int | None,
    max_conc: int | None,
    red: int | None = None,
    slo: tuple[int, int] | None = None,
    fit: tuple[float, float] | None = None,
    slots: int | None = None,
) -> LiveVerdict:
    good, bad = slo if slo is not None else (None, None)
    lo, hi = fit if fit is not None else (None, None)
    return LiveVerdict(
        knee_users=knee, red_line_users=red, max_concurrency=max_conc, slo_capacity=good,
        slo_break_users=bad, capacity_low=lo, capacity_high=hi, server_slots=slots,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("low", "high", "done"),
    [(8, 9, True), (8, 10, False), (20, 22, True), (20, 23, False), (48, 52, True),
     (48, 53, False), (0, 1, True), (1, 2, True)],
)  # fmt: skip
def test_bracket_is_resolved_at_one_user_or_ten_percent(low: int, high: int, done: bool) -> None:
    assert resolved(low, high) is done


CONFIRMED = NextStep("stop", reason="knee_confirmed")
RED_LINE = NextStep("stop", reason="red_line")

# (verdict, tested, grid_left, refine_left, stop_after_knee) → next step
NEXT_TABLE = [
    # no knee yet: the next grid level; the end of the grid ends the sweep
    (verdict(None, 8), (1, 2, 4, 8), (16, 24), 4, 1, NextStep("grid", 16)),
    (verdict(None, 64), GRID, (), 4, 1, NextStep("stop")),
    # knee at 16 after 8: bisect 12, then 10 or 14, then the last odd user
    (verdict(16, 8), (1, 2, 4, 8, 16), (24, 32), 4, 1, NextStep("refine", 12)),
    (verdict(12, 8), (1, 2, 4, 8, 16, 12), (24, 32), 3, 1, NextStep("refine", 10)),
    (verdict(16, 12), (1, 2, 4, 8, 16, 12), (24, 32), 3, 1, NextStep("refine", 14)),
    (verdict(12, 10), (1, 2, 4, 8, 16, 12, 10), (24, 32), 2, 1, NextStep("refine", 11)),
    # resolved: a tested level above the knee already confirms it → stop
    (
        verdict(11, 10),
        (1, 2, 4, 8, 16, 12, 10, 11),
        (24,),
        1,
        1,
        NextStep("stop", reason="knee_confirmed"),
    ),
    # resolved at the grid level itself: one more grid level confirms it, then stop
    (verdict(16, 15), (1, 2, 4, 8, 16, 12, 14, 15), (24, 32), 1, 1, NextStep("grid", 24)),
    (
        verdict(16, 15),
        (1, 2, 4, 8, 16, 12, 14, 15, 24),
        (32,),
        1,
        1,
        NextStep("stop", reason="knee_confirmed"),
    ),
    # N = 0 stops as soon as the knee is refined; N = 2 wants two levels above it
    (
        verdict(16, 15),
        (1, 2, 4, 8, 16, 12, 14, 15),
        (24, 32),
        1,
        0,
        NextStep("stop", reason="knee_confirmed"),
    ),
    (verdict(16, 15), (1, 2, 4, 8, 16, 12, 14, 15, 24), (32,), 1, 2, NextStep("grid", 32)),
    # early stop off (-1): the whole grid, refined
    (verdict(16, 15), (1, 2, 4, 8, 16, 12, 14, 15, 24), (32,), 1, -1, NextStep("grid", 32)),
    # 10 % of L: 32 → 48 bisects to 40, 36, 38; 36..38 is within 3.6 users → resolved
    (verdict(48, 32), (32, 48), (64,), 4, 1, NextStep("refine", 40)),
    (verdict(40, 36), (32, 48, 40, 36), (64,), 2, 1, NextStep("refine", 38)),
    (verdict(38, 36), (32, 48, 40, 36, 38), (64,), 1, 1, NextStep("stop", reason="knee_confirmed")),
    # the budget spent: no more refine stages, the early stop still applies
    (verdict(16, 12), (1, 2, 4, 8, 16, 12), (24,), 0, 1, NextStep("grid", 24)),
    (verdict(12, 8), (1, 2, 4, 8, 16, 12), (24,), 0, 1, NextStep("stop", reason="knee_confirmed")),
    # a red line is refined, then never driven further
    (verdict(None, 8, red=16), (4, 8, 16), (24, 32), 4, 1, NextStep("refine", 12)),
    (
        verdict(None, 8, red=9),
        (4, 8, 16, 12, 10, 9),
        (24, 32),
        0,
        1,
        NextStep("stop", reason="red_line"),
    ),
    # the server's slot count capped max_concurrency at 8 below a tested 12 the analysis calls
    # critical (a dip, or short): 12 is still past the capacity, so bisect 8..12, not 8..16 again
    (verdict(16, 8), (2, 8, 16, 12), (), 3, 1, NextStep("refine", 10)),
    (verdict(16, 8), (2, 8, 16, 12, 10), (), 2, 1, NextStep("refine", 9)),
    # a knee at the first level (nothing below it to recommend): nothing to bisect
    (verdict(1, None), (1,), (2, 4), 4, 1, NextStep("grid", 2)),
    # SLOs given (--slo): met up to 2, broken at 4, knee at 16 after 8: the knee's bracket first,
    # then the SLO boundary's (3), then the early stop as before
    (verdict(16, 8, slo=(2, 4)), (1, 2, 4, 8, 16), (24,), 4, 1, NextStep("refine", 12)),
    (verdict(9, 8, slo=(2, 4)), (1, 2, 4, 8, 16, 12, 10, 9), (24,), 1, 1, NextStep("refine", 3)),
    (
        verdict(9, 8, slo=(3, 4)),
        (1, 2, 4, 8, 16, 12, 10, 9, 3),
        (24,),
        0,
        1,
        NextStep("stop", reason="knee_confirmed"),
    ),
    # no knee yet but the SLOs break at 16 after 8: pin the SLO boundary before going on
    (verdict(None, 32, slo=(8, 16)), (1, 2, 4, 8, 16, 32), (64,), 4, 1, NextStep("refine", 12)),
    (verdict(None, 32, slo=(12, 16)), (8, 16, 32, 12), (64,), 3, 1, NextStep("refine", 14)),
    # the SLO boundary above the knee (throughput binds first): not refined
    (verdict(9, 8, slo=(16, 24)), (8, 16, 24, 12, 10, 9), (), 1, -1, NextStep("stop")),
    # no stage meets the SLOs, or the budget is spent: nothing to pin
    (verdict(None, 8, slo=None), (1, 2, 4, 8), (16,), 4, 1, NextStep("grid", 16)),
    (verdict(None, 32, slo=(8, 16)), (1, 2, 4, 8, 16, 32), (64,), 0, 1, NextStep("grid", 64)),
    # judgement failed: the plain grid
    (None, (1, 2, 4, 8, 16), (24,), 4, 1, NextStep("grid", 24)),
    # the fit over all stages has a plateau (fit=its 90 % interval; loadknee_locust.sweep.narrow).
    # 8 slots: knee at 16, one level past it, no plateau yet: bisect; with 12 past too the fit
    # knows 8.0-8.15 and the levels past it confirm the knee: stop (bisection also ran 10, 9)
    (verdict(16, 8), (1, 2, 4, 8, 16), (24, 32), 4, 1, NextStep("refine", 12)),
    (verdict(12, 8, fit=(8.0, 8.15)), (1, 2, 4, 8, 16, 12), (24, 32), 3, 1, CONFIRMED),
    # 12 slots: 12 good, 14 past, interval 11.8-12.3: stop without 13
    (verdict(14, 12, fit=(11.8, 12.3)), (1, 2, 4, 8, 16, 12, 14), (24, 32), 2, 1, CONFIRMED),
    # 20 slots: knee at 24 after 16: bisect 20 (no refine stage yet), then 21 - 20 is within 10 %
    (verdict(24, 16, fit=(19.0, 21.0)), (4, 8, 16, 24, 32), (48,), 4, 1, NextStep("refine", 20)),
    (verdict(24, 20, fit=(19.0, 21.0)), (4, 8, 16, 24, 32, 20), (48,), 3, 1, CONFIRMED),
    # the knee the highest level run, but two levels past the fit's interval: no grid level more
    (verdict(24, 12, fit=(11.8, 12.3)), (1, 2, 4, 8, 12, 16, 24), (32, 48), 4, 1, CONFIRMED),
    # the budget spent: the interval adds no stage; early stop off: the grid goes on
    (verdict(24, 16, fit=(19.0, 21.0)), (16, 24, 32), (48,), 0, 1, CONFIRMED),
    (verdict(14, 12, fit=(11.8, 12.3)), (8, 16, 12, 14), (24,), 2, -1, NextStep("grid", 24)),
    # straight after the grid the interval neither picks the level nor resolves (no refine stage
    # anchors it yet: the breakpoint between 8 and 16 is an extrapolation one noisy stage moves
    # by the whole gap; seen 3 users low on a 20-slot server): bisection
    (verdict(16, 8, fit=(7.6, 8.4)), (1, 2, 4, 8, 16), (24,), 4, 1, NextStep("refine", 12)),
    (verdict(24, 16, fit=(16.5, 18.0)), (4, 8, 16, 24), (32,), 4, 1, NextStep("refine", 20)),
    # after a refine stage: an interval just below the good level resolves, one well below is
    # contradicted by that level's verdict and ignored (bisection again)
    (verdict(16, 12, fit=(11.5, 11.99)), (1, 2, 4, 8, 16, 12), (24,), 3, 1, CONFIRMED),
    (verdict(16, 12, fit=(9.0, 10.0)), (1, 2, 4, 8, 16, 12), (24,), 3, 1, NextStep("refine", 14)),
    # the server's gauge ran 10 at most while requests waited (its slots): 10 goes first, whatever
    # the fit says (fresh #20: a starved 10-slot server's fit 9-9 resolved 8 → 12 at 8); once 10
    # is judged good the gauge's bound resolves it; a count outside the bracket changes nothing
    (
        verdict(12, 8, fit=(9.0, 9.0), slots=10),
        (1, 2, 4, 8, 16, 12),
        (24,),
        3,
        1,
        NextStep("refine", 10),
    ),
    (verdict(12, 8, fit=(9.0, 9.0)), (1, 2, 4, 8, 16, 12), (24,), 3, 1, CONFIRMED),
    (verdict(12, 10, fit=(9.0, 9.0), slots=10), (1, 2, 4, 8, 16, 12, 10), (24,), 2, 1, CONFIRMED),
    (verdict(16, 8, slots=16), (1, 2, 4, 8, 16), (24,), 4, 1, NextStep("refine", 12)),
    (verdict(16, 8, slots=8), (1, 2, 4, 8, 16), (24,), 4, 1, NextStep("refine", 12)),
    (verdict(16, 8, slots=10), (1, 2, 4, 8, 16), (24,), 0, 1, NextStep("grid", 24)),  # no budget
    # a red line is refined the same way, then never driven further
    (verdict(None, 8, red=16, fit=(7.6, 8.4)), (4, 8, 16), (24,), 4, 1, NextStep("refine", 12)),
    (verdict(None, 8, red=9, fit=(7.6, 8.4)), (4, 8, 16, 9), (24,), 3, 1, RED_LINE),
]


def test_a_tighter_target_refines_where_the_default_stops() -> None:
    v = verdict(24, 20, fit=(19.0, 21.6))
    tested, left = (16, 24, 32, 20), (48,)
    stop = NextStep("stop", reason="knee_confirmed")
    kw = {"tested": tested, "grid_left": left, "refine_left": 3, "stop_after_knee": 1}
    assert next_step(v, refined=1, **kw) == stop  # type: ignore[arg-type]
    tight = next_step(v, refined=1, target_pct=2.0, **kw)  # type: ignore[arg-type]
    assert tight == NextStep("refine", 21)


@pytest.mark.parametrize(("v", "tested", "left", "budget", "after", "expected"), NEXT_TABLE)
def test_next_step(
    v: LiveVerdict | None,
    tested: tuple[int, ...],
    left: tuple[int, ...],
    budget: int,
    after: int,
    expected: NextStep,
) -> None:
    refined = sum(1 for u in tested if u not in GRID)  # the refine stages run so far
    got = next_step(
        v,
        tested=tested,
        grid_left=left,
        refine_left=budget,
        stop_after_knee=after,
        refined=refined,
    )
    assert got == expected


def plan(**kw: object) -> SchedulePlan:
    base: dict[str, object] = {
        "levels": (2, 4, 8, 16, 24, 32),
        "stage_seconds": 10.0,
        "warmup_seconds": 2.0,
        "cooldown_seconds": 3.0,
        "baseline_requests": 0,
        "refine": True,
        "stop_after_knee": 1,
    }
    base.update(kw)
    return SchedulePlan(**base)  # type: ignore[arg-type]


def true_capacity_judge(capacity: int, sched: Schedule):  # type: ignore[no-untyped-def]
    """A stand-in for the analysis: levels above ``capacity`` are past the knee."""

    def decide(stage: int) -> LiveVerdict:
        tested = sorted(r.target_users for r in sched.closed if r.kind != "baseline")
        past = [u for u in tested if u > capacity]
        good = [u for u in tested if u <= capacity]
        return verdict(min(past) if past else None, max(good) if good else None)

    return decide


def run_to_end(sched: Schedule, decide, t0: float = 0.0) -> float:  # type: ignore[no-untyped-def]
    t = t0
    while not sched.advance(t, decide=decide).finished:
        t += 1.0
        assert t < 10_000
    return t


@pytest.mark.parametrize(
    ("capacity", "levels", "reason"),
    [
        (12, [2, 4, 8, 16, 12, 14, 13], "knee_confirmed"),
        (10, [2, 4, 8, 16, 12, 10, 11], "knee_confirmed"),
        (20, [2, 4, 8, 16, 24, 20, 22], "knee_confirmed"),  # 20..22: within 10 % of 20
        (16, [2, 4, 8, 16, 24, 20, 18, 17], "knee_confirmed"),
        (99, [2, 4, 8, 16, 24, 32], "duration"),
    ],
)
def test_schedule_refines_then_stops_after_the_knee(
    capacity: int, levels: list[int], reason: str
) -> None:
    sched = Schedule(plan(), 0.0)
    run_to_end(sched, true_capacity_judge(capacity, sched))
    assert [r.target_users for r in sched.closed] == levels
    assert [r.stage for r in sched.closed] == list(range(len(levels)))
    assert [p.users for p in sched.stages] == levels  # the plan is final: the rest was dropped
    kinds = [r.kind for r in sched.closed]
    assert kinds == ["refine" if u not in (2, 4, 8, 16, 24, 32) else "step" for u in levels]
    assert sched.position().stop_reason == reason


def fitted_capacity_judge(capacity: int, sched: Schedule):  # type: ignore[no-untyped-def]
    """As :func:`true_capacity_judge`, plus the fit's interval (capacity ± 0.3) once two tested
    levels lie past it, as the analysis's fit finds its plateau."""

    def decide(stage: int) -> LiveVerdict:
        tested = sorted(r.target_users for r in sched.closed if r.kind != "baseline")
        past = [u for u in tested if u > capacity]
        good = [u for u in tested if u <= capacity]
        fit = (capacity - 0.3, capacity + 0.3) if len(past) >= 2 else None
        return verdict(min(past) if past else None, max(good) if good else None, fit=fit)

    return decide


@pytest.mark.parametrize(
    ("capacity", "levels"),
    [
        (12, [2, 4, 8, 16, 12, 14]),  # bisection: ... 14, 13
        (10, [2, 4, 8, 16, 12, 10]),  # bisection: ... 10, 11
        (20, [2, 4, 8, 16, 24, 20, 22]),  # the same: 20..22 is within 10 % of 20 either way
    ],
)
def test_the_fit_interval_saves_refine_stages(capacity: int, levels: list[int]) -> None:
    sched = Schedule(plan(), 0.0)
    run_to_end(sched, fitted_capacity_judge(capacity, sched))
    assert [r.target_users for r in sched.closed] == levels
    assert sched.position().stop_reason == "knee_confirmed"


def test_refine_budget_and_no_refine() -> None:
    sched = Schedule(plan(refine_max_stages=1), 0.0)
    run_to_end(sched, true_capacity_judge(10, sched))
    assert [r.target_users for r in sched.closed] == [2, 4, 8, 16, 12]
    sched = Schedule(plan(refine=False, stop_after_knee=-1), 0.0)
    assert not sched.plan.adaptive
    run_to_end(sched, None)
    assert [r.target_users for r in sched.closed] == [2, 4, 8, 16, 24, 32]


def test_the_judgement_runs_during_the_cooldown_and_holds_the_next_stage() -> None:
    sched = Schedule(plan(), 0.0)
    asked: list[tuple[float, int]] = []
    ready_at = {0: 11.0, 1: 30.0}

    def decide(stage: int) -> LiveVerdict | str:
        asked.append((t, stage))
        return verdict(None, 2) if t >= ready_at.get(stage, 0.0) else PENDING

    t = 0.0
    trace = []
    while t <= 31.0:
        pos = sched.advance(t, decide=decide)
        trace.append((t, pos.stage, pos.phase, pos.users))
        t += 1.0
    closed = sched.closed
    # stage 0: window ends at 10, closed (and written) at once and its judgement asked in that
    # same call (it runs during the cooldown), answered at 11; the cooldown still ends at 13:
    # the next stage opens then, not when the judgement came
    assert closed[0].measure_end_unix_s == 10.0 and closed[0].end_unix_s == 13.0
    assert asked[:2] == [(10.0, 0), (11.0, 0)]
    assert all(stage != 0 for _, stage in asked[2:])  # the answer is kept, not asked again
    assert (12.0, 0, "cooldown", 0) in trace and (13.0, 1, "warmup", 4) in trace
    # stage 1: window ends at 23, cooldown at 26, the judgement only at 30: users wait for it
    assert (29.0, 1, "cooldown", 0) in trace and (30.0, 2, "warmup", 8) in trace
    assert closed[1].end_unix_s == 26.0


def test_a_failed_judgement_falls_back_to_the_plain_grid() -> None:
    sched = Schedule(plan(), 0.0)
    run_to_end(sched, lambda _stage: None)
    assert [r.target_users for r in sched.closed] == [2, 4, 8, 16, 24, 32]
    assert sched.fell_back and sched.position().stop_reason == "duration"


def test_stop_while_awaiting_a_judgement() -> None:
    sched = Schedule(plan(), 0.0)
    for t in range(0, 12):
        sched.advance(float(t), decide=lambda _s: PENDING)
    sched.stop(12.0, "stopped")
    pos = sched.position()
    assert pos.finished and pos.stop_reason == "stopped"
    assert [r.target_users for r in sched.closed] == [2]


def test_the_next_stage_waits_for_the_last_levels_users_after_the_judgement() -> None:
    """An adaptive stage closes for its judgement before its users stopped; the next level must
    still wait for them (a 16-user stage's last requests ran into a 12-user refine stage)."""
    sched = Schedule(plan(), 0.0)
    for t in range(0, 11):
        sched.advance(float(t), decide=lambda _s: verdict(None, 2))
    assert sched.closed[0].end_unix_s == 13.0  # closed and judged at 10, cooldown to 13
    held = [sched.advance(t, users_running=n) for t, n in ((13.0, 3), (15.5, 1))]
    assert [(p.stage, p.phase) for p in held] == [(0, "cooldown"), (0, "cooldown")]
    opened = sched.advance(16.0, users_running=0)
    assert (opened.stage, opened.phase, opened.users) == (1, "warmup", 4)
