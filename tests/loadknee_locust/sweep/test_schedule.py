"""The sweep schedule as a pure function of time and completed requests: no sleeping, no locust."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.sweep.schedule import (
    Position,
    RedLine,
    Schedule,
    SchedulePlan,
    parse_levels,
)

T0 = 1_000.0


def timed(**kw: object) -> SchedulePlan:
    base: dict[str, object] = {
        "levels": (1, 2, 4),
        "stage_seconds": 10.0,
        "warmup_seconds": 3.0,
        "cooldown_seconds": 2.0,
        "baseline_requests": 0,
    }
    base.update(kw)
    return SchedulePlan(**base)  # type: ignore[arg-type]


def brief(pos: Position) -> tuple[object, ...]:
    return (pos.stage, pos.kind, pos.phase, pos.users, pos.finished, pos.stop_reason)


@pytest.mark.parametrize(
    ("text", "levels"),
    [("1,2,4,8", (1, 2, 4, 8)), (" 1, 16 ,64", (1, 16, 64)), ("3", (3,))],
)
def test_parse_levels(text: str, levels: tuple[int, ...]) -> None:
    assert parse_levels(text) == levels


@pytest.mark.parametrize("text", ["", "0,1", "a,b", "1,-2"])
def test_parse_levels_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="levels"):
        parse_levels(text)


def test_plan_rejects_stage_shorter_than_warmup() -> None:
    with pytest.raises(ValueError, match="measured window"):
        timed(stage_seconds=3.0, warmup_seconds=3.0)
    timed(stage_seconds=3.0, warmup_seconds=3.0, stage_requests=5)  # count mode: fine


# elapsed seconds → (stage, kind, phase, users, finished, stop_reason), one schedule per table
TIMED_TABLE = [
    (0.0, (0, "step", "warmup", 1, False, None)),
    (2.9, (0, "step", "warmup", 1, False, None)),
    (3.0, (0, "step", "measure", 1, False, None)),
    (9.9, (0, "step", "measure", 1, False, None)),
    (10.0, (0, "step", "cooldown", 0, False, None)),
    (11.9, (0, "step", "cooldown", 0, False, None)),
    (12.0, (1, "step", "warmup", 2, False, None)),
    (15.5, (1, "step", "measure", 2, False, None)),
    (22.0, (1, "step", "cooldown", 0, False, None)),
    (24.5, (2, "step", "warmup", 4, False, None)),  # a late tick: the stage starts when seen
    (34.5, (2, "step", "cooldown", 0, False, None)),
    (36.5, (2, "step", "cooldown", 0, True, "duration")),
]


def test_timed_stages_step_through_phases() -> None:
    sched = Schedule(timed(), T0)
    for elapsed, expected in TIMED_TABLE:
        assert brief(sched.advance(T0 + elapsed)) == expected, elapsed
    rows = [r.as_row(1) for r in sched.pop_closed()]
    assert [(r["stage"], r["target_users"], r["stop_reason"]) for r in rows] == [
        (0, 1, "duration"),
        (1, 2, "duration"),
        (2, 4, "duration"),
    ]
    assert rows[1]["start_unix_s"] == T0 + 12.0
    assert rows[1]["warmup_end_unix_s"] == T0 + 15.0  # planned, though seen at 15.5
    assert rows[1]["measure_end_unix_s"] == T0 + 22.0
    assert rows[1]["end_unix_s"] == T0 + 24.5  # when the next stage's users were released
    assert sched.pop_closed() == []  # handed over once


def test_a_late_tick_keeps_the_planned_window_and_still_pauses() -> None:
    sched = Schedule(timed(), T0)
    sched.advance(T0)
    # the users are dropped only now, so the 2 s cooldown starts now
    assert brief(sched.advance(T0 + 100.0)) == (0, "step", "cooldown", 0, False, None)
    assert brief(sched.advance(T0 + 102.0)) == (1, "step", "warmup", 2, False, None)
    (rec,) = sched.pop_closed()
    assert (rec.warmup_end_unix_s, rec.measure_end_unix_s, rec.end_unix_s) == (
        T0 + 3.0,
        T0 + 10.0,
        T0 + 102.0,
    )


def test_the_cooldown_waits_for_users_still_finishing_requests() -> None:
    """Locust counts a stopping user towards the next target: the next level must not start
    while the last level's users are still finishing their in-flight requests."""
    sched = Schedule(timed(), T0)
    sched.advance(T0 + 10.0)  # stage 0's window closes: users dropped, cooldown from here
    # the 2 s are over, but one user is still streaming its last response
    assert brief(sched.advance(T0 + 12.5, users_running=1))[:3] == (0, "step", "cooldown")
    assert brief(sched.advance(T0 + 14.0, users_running=1))[:3] == (0, "step", "cooldown")
    assert brief(sched.advance(T0 + 14.2, users_running=0)) == (1, "step", "warmup", 2, False, None)
    assert sched.pop_closed()[0].end_unix_s == T0 + 14.2


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (T0 - 5.0, (0, "warmup")),  # before the sweep: the first stage's warm-up
        (T0 + 1.0, (0, "warmup")),
        (T0 + 3.0, (0, "measure")),
        (T0 + 9.99, (0, "measure")),  # started in the window: measure even if it ends later
        (T0 + 10.5, (0, "cooldown")),
        (T0 + 12.0, (1, "warmup")),
        (T0 + 20.0, (1, "measure")),
        (T0 + 24.0, (1, "cooldown")),
        (T0 + 35.0, (2, "cooldown")),
    ],
)
def test_locate_by_start_time(start: float, expected: tuple[int, str]) -> None:
    sched = Schedule(timed(), T0)
    for elapsed, _ in TIMED_TABLE:
        sched.advance(T0 + elapsed)
    assert sched.locate(start) == expected


def test_baseline_one_warmup_then_exactly_n_measured() -> None:
    sched = Schedule(timed(levels=(2,), baseline_requests=3), T0)
    assert brief(sched.advance(T0)) == (0, "baseline", "warmup", 1, False, None)
    # strictly sequential requests, 1 s each
    labels = []
    for i in range(6):
        start, end = T0 + i, T0 + i + 1.0
        labels.append(sched.locate(start)[1])
        sched.observe(start, end)
    assert labels == ["warmup", "baseline", "baseline", "baseline", "cooldown", "cooldown"]
    pos = sched.advance(T0 + 5.0)
    assert brief(pos) == (0, "baseline", "cooldown", 0, False, None)
    assert brief(sched.advance(T0 + 6.9)) == (0, "baseline", "cooldown", 0, False, None)
    assert brief(sched.advance(T0 + 7.0)) == (1, "step", "warmup", 2, False, None)
    (rec,) = sched.pop_closed()
    assert (rec.warmup_end_unix_s, rec.measure_end_unix_s) == (T0 + 1.0, T0 + 4.0)
    assert rec.stop_reason == "request_count"
    assert rec.end_unix_s == T0 + 7.0  # 2 s after the tick that dropped the users (T0 + 5)


def test_count_stage_waits_for_measured_completions() -> None:
    plan = timed(
        levels=(2,), stage_requests=3, warmup_seconds=1.0, stage_seconds=0.0,
        min_requests_per_user=1,  # the count mechanics alone (the floor has its own test)
    )  # fmt: skip
    sched = Schedule(plan, T0)
    sched.advance(T0)
    sched.observe(T0 + 0.2, T0 + 0.9)  # warm-up (started before 1 s): not counted
    assert brief(sched.advance(T0 + 1.0)) == (0, "step", "measure", 2, False, None)
    sched.observe(T0 + 1.1, T0 + 2.0)
    sched.observe(T0 + 1.2, T0 + 2.5)
    assert brief(sched.advance(T0 + 500.0))[2] == "measure"  # no time limit in count mode
    sched.observe(T0 + 1.3, T0 + 2.2)  # arrives late (another worker): third one
    assert brief(sched.advance(T0 + 500.5))[2] == "cooldown"
    assert sched.locate(T0 + 2.4) == (0, "measure")  # before the latest end of the three
    assert sched.locate(T0 + 2.6) == (0, "cooldown")
    sched.advance(T0 + 503.0)
    (rec,) = sched.pop_closed()
    assert (rec.measure_end_unix_s, rec.stop_reason) == (T0 + 2.5, "request_count")
    assert sched.seconds_left(T0) == 0.0


def test_time_limit_cuts_the_stage_in_progress() -> None:
    sched = Schedule(timed(time_limit_s=15.0), T0)
    for elapsed in (0.0, 3.0, 10.0, 12.0, 14.0):
        sched.advance(T0 + elapsed)
    assert brief(sched.advance(T0 + 15.0)) == (1, "step", "cooldown", 0, True, "time_limit")
    recs = sched.pop_closed()
    assert [r.stop_reason for r in recs] == ["duration", "time_limit"]
    assert recs[1].warmup_end_unix_s == recs[1].measure_end_unix_s == T0 + 15.0


def test_external_stop_in_cooldown_keeps_the_stage_reason() -> None:
    sched = Schedule(timed(), T0)
    for elapsed in (0.0, 3.0, 10.0):
        sched.advance(T0 + elapsed)
    sched.stop(T0 + 11.0, "stopped")
    assert sched.finished
    (rec,) = sched.pop_closed()
    assert (rec.stop_reason, rec.end_unix_s) == ("duration", T0 + 11.0)
    sched.stop(T0 + 12.0, "stopped")  # twice: nothing more
    assert sched.pop_closed() == []


def test_red_line_ends_the_sweep_after_the_stage() -> None:
    sched = Schedule(timed(), T0)
    asked: list[int] = []

    def red(stage: int) -> bool:
        asked.append(stage)
        return stage == 1

    for elapsed, _ in TIMED_TABLE:
        pos = sched.advance(T0 + elapsed, red)
    assert asked == [0, 1]
    assert (pos.finished, pos.stop_reason) == (True, "red_line")
    assert [r.stop_reason for r in sched.pop_closed()] == ["duration", "red_line"]


@pytest.mark.parametrize(
    ("line", "requests", "errors", "p95", "crossed"),
    [
        (RedLine(error_pct=100.0), 10, 10, 1e9, False),  # 100: no share is above it
        (RedLine(), 10, 10, None, True),  # the shared default: the analysis's red line
        (RedLine(error_pct=0.0), 100, 1, None, True),  # 0: any error
        (RedLine(error_pct=0.0), 100, 0, None, False),
        (RedLine(error_pct=5.0), 100, 5, None, False),
        (RedLine(error_pct=5.0), 100, 6, None, True),
        (RedLine(p95_ms=1000.0), 10, 0, 1000.0, False),
        (RedLine(p95_ms=1000.0), 10, 0, 1000.1, True),
        (RedLine(p95_ms=1000.0), 10, 0, None, False),
        (RedLine(error_pct=1.0), 0, 0, None, False),
    ],
)
def test_red_line_thresholds(
    line: RedLine, requests: int, errors: int, p95: float | None, crossed: bool
) -> None:
    assert line.crossed(requests=requests, errors=errors, p95_ms=p95) is crossed


def test_seconds_left() -> None:
    sched = Schedule(timed(), T0)
    sched.advance(T0)
    assert sched.seconds_left(T0 + 1.0) == pytest.approx(3 * 12.0 - 1.0)
    limited = Schedule(timed(time_limit_s=5.0), T0)
    assert limited.seconds_left(T0 + 1.0) == pytest.approx(4.0)
    counted = Schedule(timed(stage_requests=5), T0)
    assert counted.seconds_left(T0) is None


def test_from_options_reads_run_time_as_time_limit() -> None:
    opts = SimpleNamespace(  # as Locust parsed them: the sweep, the two limits, the refine pass
        llm_levels="1,2,4,8", llm_stage_seconds=60.0, llm_stage_requests=0,
        llm_warmup_seconds=30.0, llm_cooldown_seconds=5.0, llm_baseline_requests=20,
        llm_time_limit=0.0, run_time=300,
        llm_no_refine=False, llm_refine_max_stages=4, llm_stop_after_knee=1,
    )  # fmt: skip
    plan = SchedulePlan.from_options(LlmOptions.from_parsed(opts))
    assert plan.levels == (1, 2, 4, 8) and plan.time_limit_s == 300.0
    assert [(s.kind, s.users) for s in plan.stages()][:2] == [("baseline", 1), ("step", 1)]
    opts.llm_time_limit = 100.0
    assert SchedulePlan.from_options(LlmOptions.from_parsed(opts)).time_limit_s == 100.0
    opts.llm_time_limit = 500.0  # the sooner of the two
    assert SchedulePlan.from_options(LlmOptions.from_parsed(opts)).time_limit_s == 300.0
    opts.run_time = None
    assert SchedulePlan.from_options(LlmOptions.from_parsed(opts)).time_limit_s == 500.0
    assert plan.refine and plan.refine_max_stages == 4 and plan.stop_after_knee == 1
    opts.llm_no_refine, opts.llm_stop_after_knee = True, -1
    assert not SchedulePlan.from_options(LlmOptions.from_parsed(opts)).adaptive


def test_red_line_from_options() -> None:
    assert RedLine.from_options(LlmOptions()) == RedLine()
    red = RedLine.from_options(LlmOptions(red_line_error_pct=5.0, red_line_p95_ms=800.0))
    assert (red.error_pct, red.p95_ms, red.enabled) == (5.0, 800.0, True)
    assert not RedLine(error_pct=100.0).enabled


def test_rows_are_labelled_by_planned_boundaries_before_a_tick_sees_them() -> None:
    sched = Schedule(timed(), T0)
    sched.advance(T0)
    # no advance since T0: a request started after the planned warm-up end is measured already
    assert sched.locate(T0 + 3.2) == (0, "measure")
    assert sched.locate(T0 + 10.1) == (0, "cooldown")
    assert sched.position().phase == "warmup"  # the position moves only with advance()


def test_a_counted_stage_estimates_its_time_left_from_its_rate_so_far() -> None:
    plan = timed(levels=(2,), stage_requests=10, warmup_seconds=1.0, stage_seconds=0.0,
                 min_requests_per_user=1)  # fmt: skip
    sched = Schedule(plan, T0)
    sched.advance(T0)
    assert sched.counted_stage_eta(T0 + 0.5) is None  # warm-up: nothing measured yet
    sched.advance(T0 + 1.0)
    sched.observe(T0 + 1.1, T0 + 2.0)
    assert sched.counted_stage_eta(T0 + 2.0) is None  # one request is no rate
    sched.observe(T0 + 1.2, T0 + 3.0)
    # 2 requests in the 4 s since the window opened: 8 more take 16 s, then the 2 s cooldown
    assert sched.counted_stage_eta(T0 + 5.0) == pytest.approx(18.0)
    timed_sched = Schedule(timed(), T0)
    timed_sched.advance(T0 + 4.0)
    assert timed_sched.counted_stage_eta(T0 + 4.0) is None  # a timed stage knows its time
