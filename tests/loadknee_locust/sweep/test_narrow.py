"""Refine levels chosen by the capacity's interval: where they narrow it most, when to stop."""

from __future__ import annotations

import pytest

from loadknee_locust.sweep.narrow import answer_resolved, narrowing_level
from loadknee_locust.sweep.refine import LiveVerdict

Interval = tuple[float, float] | None

# (low, high, interval, target %) → resolved
RESOLVED_TABLE: list[tuple[int, int, Interval, float, bool]] = [
    # no interval: the bracket itself, max(1 user, 10 % of low)
    (8, 16, None, 10.0, False),
    (8, 9, None, 10.0, True),
    (20, 22, None, 10.0, True),
    (20, 23, None, 10.0, False),
    # an interval inside the bracket: only its part above low counts
    (8, 16, (7.6, 8.4), 10.0, True),  # 8.4 − 8 ≤ 1
    (8, 16, (8.0, 9.2), 10.0, False),  # 9.2 − 8 > 1: 9 could still be good
    (12, 16, (11.8, 12.3), 10.0, True),
    (16, 24, (19.0, 21.0), 10.0, False),
    (20, 24, (19.0, 21.0), 10.0, True),  # 21 − 20 ≤ 2
    # the fit puts the capacity just below the last good level: nothing left to raise
    (12, 16, (11.5, 11.99), 10.0, True),
    # an interval above the bracket (the stage rule saw the knee first): the bracket decides
    (8, 12, (13.0, 14.0), 10.0, False),
    # the target is the flag's: 25 % of 16 is 4 users
    (16, 20, None, 25.0, True),
    (16, 24, (19.0, 20.0), 25.0, True),
    (16, 24, (19.0, 20.0), 10.0, False),
    # target 0: one user still resolves (a bracket of one user has no level inside)
    (8, 9, None, 0.0, True),
]


@pytest.mark.parametrize(("low", "high", "interval", "pct", "expected"), RESOLVED_TABLE)
def test_answer_resolved(
    low: int, high: int, interval: Interval, pct: float, expected: bool
) -> None:
    assert answer_resolved(low, high, interval, pct) is expected


# (low, high, interval, tested) → the next refine level (None: resolved or nothing left)
LEVEL_TABLE: list[tuple[int, int, Interval, tuple[int, ...], int | None]] = [
    # no interval: bisection of the bracket, as before
    (8, 16, None, (8, 16), 12),
    (12, 16, None, (8, 12, 16), 14),
    (8, 12, None, (8, 12, 16), 10),
    (8, 11, None, (8, 11), 9),  # the lower of two middles
    (32, 48, None, (32, 48), 40),
    # with an interval: its middle inside the bracket, not the bracket's
    (8, 16, (12.5, 13.5), (8, 16), 13),
    (8, 16, (11.6, 12.4), (8, 16), 12),
    (16, 24, (19.0, 21.0), (16, 24, 32), 20),
    (8, 16, (7.0, 9.6), (8, 16), 9),  # clipped to the bracket: [8, 9.6], middle 8.8
    (16, 32, (20.0, 40.0), (16, 32), 26),  # clipped at the top: [20, 32]
    # the middle already tested: the nearest untested level
    (8, 16, (11.6, 12.4), (8, 12, 16), 11),
    # resolved by the interval: no stage at all
    (8, 16, (7.6, 8.4), (8, 16), None),
    # every level inside tested
    (8, 10, None, (8, 9, 10), None),
    # an interval that misses the bracket above it: bisection again
    (8, 12, (13.0, 14.0), (8, 12, 16), 10),
]


@pytest.mark.parametrize(("low", "high", "interval", "tested", "expected"), LEVEL_TABLE)
def test_narrowing_level(
    low: int, high: int, interval: Interval, tested: tuple[int, ...], expected: int | None
) -> None:
    assert narrowing_level(low, high, interval, tested) == expected


def test_the_live_answer_carries_the_interval() -> None:
    v = LiveVerdict.from_json(
        {"knee_users": 16, "red_line_users": None, "max_concurrency": 8, "capacity_low": 7.6,
         "capacity_high": 8.4}
    )  # fmt: skip
    assert v.interval == (7.6, 8.4)
    assert LiveVerdict.from_json({"knee_users": 16, "max_concurrency": 8}).interval is None
