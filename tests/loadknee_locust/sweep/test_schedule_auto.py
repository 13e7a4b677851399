"""Stages long enough, not longer: ``auto`` stage lengths and the per-user floor of counted
stages, as pure table tests of the schedule (synthetic closed-loop requests, no sleeping)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.sweep.schedule import (
    MIN_REQUESTS_PER_USER,
    Schedule,
    SchedulePlan,
    StageRecord,
    parse_stage_length,
)

T0 = 1_000.0
TOKENS = 64.0


def plan(**kw: object) -> SchedulePlan:
    base: dict[str, object] = {
        "levels": (4,),
        "stage_seconds": 0.0,
        "warmup_seconds": 2.0,
        "cooldown_seconds": 1.0,
        "baseline_requests": 0,
        "auto": "seconds",
        "precision_pct": 5.0,
        "min_measure_s": 10.0,
        "max_measure_s": 40.0,
    }
    base.update(kw)
    return SchedulePlan(**base)  # type: ignore[arg-type]


def closed_loop(users: int, span: Callable[[float], float], horizon: float) -> list[tuple]:
    """Each user sends its next request when the last ends: (start, end) pairs up to horizon."""
    out = []
    for u in range(users):
        t = T0 + 0.1 * u
        while t < T0 + horizon:
            d = span(t)
            out.append((t, t + d))
            t += d
    return sorted(out, key=lambda r: r[1])


def drive(sched: Schedule, requests: list[tuple], horizon: float) -> StageRecord:
    """Tick once a second; each tick first hands over the requests completed since the last."""
    i, t = 0, T0
    while t <= T0 + horizon and not sched.closed:
        while i < len(requests) and requests[i][1] <= t:
            start, end = requests[i]
            sched.observe(start, end, tokens=TOKENS, ttft_s=0.02)
            i += 1
        sched.advance(t)
        t += 1.0
    (rec,) = sched.closed
    return rec


def test_a_steady_stage_ends_at_its_minimum_as_precise() -> None:
    # every request 1.5 s, 64 tokens: window rates are all equal, the interval ~±0 %
    sched = Schedule(plan(), T0)
    rec = drive(sched, closed_loop(4, lambda t: 1.5, 80.0), 80.0)
    assert rec.stop_reason == "precise"
    assert rec.measure_end_unix_s - rec.warmup_end_unix_s == pytest.approx(10.0)


def test_a_noisy_stage_holds_to_its_maximum_and_says_imprecise() -> None:
    # slow spells: 0.4 s requests for 3 s, then 3 s ones (the rate swings 7×)
    def span(t: float) -> float:
        return 0.4 if int((t - T0) / 3.0) % 2 else 3.0

    sched = Schedule(plan(), T0)
    rec = drive(sched, closed_loop(4, span, 80.0), 80.0)
    assert rec.stop_reason == "imprecise"
    assert rec.measure_end_unix_s - rec.warmup_end_unix_s == pytest.approx(40.0)


def test_a_looser_precision_ends_the_same_noisy_stage_sooner() -> None:
    def span(t: float) -> float:
        return 1.0 + 0.3 * (int(t - T0) % 3)  # mild: 1.0, 1.3, 1.6 s

    tight = drive(Schedule(plan(precision_pct=0.5), T0), closed_loop(4, span, 80.0), 80.0)
    loose = drive(Schedule(plan(precision_pct=20.0), T0), closed_loop(4, span, 80.0), 80.0)
    assert loose.stop_reason == "precise"
    assert loose.measure_end_unix_s < tight.measure_end_unix_s


def test_requests_auto_needs_its_per_user_floor_before_precision() -> None:
    # 8 users × 5 requests = 40 counted before any precision check; 4 s requests: ~20 s
    sched = Schedule(plan(levels=(8,), auto="requests", min_measure_s=1.0), T0)
    assert sched.stages[0].measure_requests == 8 * MIN_REQUESTS_PER_USER
    rec = drive(sched, closed_loop(8, lambda t: 4.0, 120.0), 120.0)
    assert rec.stop_reason == "precise"
    measured = [
        r for r in closed_loop(8, lambda t: 4.0, 120.0)
        if rec.warmup_end_unix_s <= r[0] < rec.measure_end_unix_s
    ]  # fmt: skip
    assert len(measured) >= 8 * MIN_REQUESTS_PER_USER
    # a counted window closes at a completion, never between two
    assert any(r[1] == rec.measure_end_unix_s for r in closed_loop(8, lambda t: 4.0, 120.0))


@pytest.mark.parametrize(("asked", "users", "held"), [(3, 4, 20), (40, 8, 40), (40, 16, 80)])
def test_a_counted_stage_never_measures_fewer_than_five_per_user(asked, users, held) -> None:
    p = plan(auto="off", stage_requests=asked, levels=(users,))
    assert p.stages()[0].measure_requests == held


@pytest.mark.parametrize(
    ("text", "value"), [("auto", None), (" AUTO ", None), ("12", 12.0), ("0", 0.0), (7, 7.0)]
)
def test_parse_stage_length(text, value) -> None:
    assert parse_stage_length(text, "--x") == value


@pytest.mark.parametrize("text", ["-1", "soon", "nan"])
def test_parse_stage_length_rejects(text) -> None:
    with pytest.raises(ValueError, match="--x"):
        parse_stage_length(text, "--x")


def test_options_auto_reach_the_plan() -> None:
    p = SchedulePlan.from_options(
        LlmOptions(stage_seconds="auto", stage_precision_pct=3.0, stage_max_seconds=90.0)
    )
    assert (p.auto, p.precision_pct, p.min_measure_s, p.max_measure_s) == (
        "seconds", 3.0, 10.0, 90.0
    )  # fmt: skip
    assert all(s.auto for s in p.stages()[1:])
    assert Schedule(p, T0).seconds_left(T0) is None  # an auto stage has no planned end
    counted = SchedulePlan.from_options(LlmOptions(stage_requests="auto"))
    assert counted.auto == "requests"
    assert counted.stages()[-1].measure_requests == 64 * MIN_REQUESTS_PER_USER
    with pytest.raises(ValueError, match="stage-requests must be whole"):
        SchedulePlan.from_options(LlmOptions(stage_requests="2.5"))
    with pytest.raises(ValueError, match="min-seconds"):
        SchedulePlan.from_options(
            LlmOptions(stage_seconds="auto", stage_min_seconds=60.0, stage_max_seconds=30.0)
        )
