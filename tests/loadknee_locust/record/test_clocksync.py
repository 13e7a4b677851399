"""The worker clock-offset estimate (pure): NTP's two-way minimum, and rows moved by it."""

from __future__ import annotations

import pytest

from loadknee_locust.record.clocksync import DownwardDelay, WorkerClocks


def _worker_facts(theta: float, down_delays: list[float], sent_master: float) -> dict:
    """What a worker whose clock reads ``theta`` ahead reports after these stage-message trips."""
    down = DownwardDelay()
    for i, d in enumerate(down_delays):
        master_send = 100.0 + i
        down.observe({"sent_unix_s": master_send}, master_send + d + theta)
    return down.report("1", sent_master + theta)


@pytest.mark.parametrize(
    ("theta", "d_down", "d_up", "bound"),
    [
        (2.0, [0.004, 0.001, 0.030], [0.002, 0.050], 0.0015),  # minimum of each direction
        (-0.75, [0.0005], [0.0005], 0.0005),
        (0.0, [0.010], [0.010], 0.010),
    ],
)
def test_two_way_minimum_recovers_the_offset(
    theta: float, d_down: list[float], d_up: list[float], bound: float
) -> None:
    clocks = WorkerClocks()
    for j, d in enumerate(d_up):
        sent = 200.0 + j  # master-clock time the worker sent it
        assert clocks.observe(_worker_facts(theta, d_down, sent), sent + d) == "1"
    est = clocks.offset("1")
    assert est is not None and est.reports == len(d_up) and est.stage_messages == len(d_down)
    # error = (d1min - d2min) / 2, within the recorded bound
    assert est.offset_s == pytest.approx(theta + (min(d_down) - min(d_up)) / 2, abs=1e-9)
    assert est.bound_s == pytest.approx(bound, abs=1e-9)
    assert abs(est.offset_s - theta) <= est.bound_s + 1e-9


def test_rows_move_onto_the_masters_clock() -> None:
    clocks = WorkerClocks()
    clocks.observe(_worker_facts(2.0, [0.001], 50.0), 50.001)
    row = {"start_unix_s": 112.0, "end_unix_s": 112.5, "e2e_ms": 500.0, "worker": "1"}
    moved = clocks.to_master("1", row)
    assert moved["start_unix_s"] == pytest.approx(110.0, abs=1e-6)
    assert moved["end_unix_s"] - moved["start_unix_s"] == pytest.approx(0.5)
    assert moved["e2e_ms"] == 500.0
    assert clocks.as_json()["1"]["offset_s"] == pytest.approx(2.0, abs=1e-6)


def test_one_direction_only_assumes_no_delay_and_says_the_bound_is_unknown() -> None:
    clocks = WorkerClocks()
    facts = DownwardDelay().report("0", 10.0 + 3.0)  # no stage message seen; clock 3 s ahead
    clocks.observe(facts, 10.0)
    est = clocks.offset("0")
    assert est is not None and est.offset_s == pytest.approx(3.0) and est.bound_s is None


def test_unknown_workers_and_bad_facts_leave_rows_alone() -> None:
    clocks = WorkerClocks()
    assert clocks.observe(None, 1.0) is None
    assert clocks.observe({"sent_unix_s": True}, 1.0) is None
    row = {"start_unix_s": 5.0, "end_unix_s": 6.0}
    assert clocks.to_master("9", dict(row)) == row
    assert clocks.as_json() == {}


def _row(user: str, start: float, end: float) -> dict:
    return {"start_unix_s": start, "end_unix_s": end, "worker": "1", "user_id": user}


@pytest.mark.parametrize(
    ("gap_s", "kept_theta", "why"),
    [
        (0.0002, 2.0, "0.2 ms after the last row: the newer θ (2.0014) would put it 1.2 ms before"),
        (0.0100, 2.0014, "10 ms after: the newer θ keeps the order, so it applies"),
    ],
)
def test_one_users_rows_keep_their_order_when_the_estimate_moves(
    gap_s: float, kept_theta: float, why: str
) -> None:
    clocks = WorkerClocks()
    clocks.observe(_worker_facts(2.0, [0.001], 50.0), 50.001)  # θ 2.0 (2.0 + (1 ms - 1 ms) / 2)
    third = clocks.to_master("1", _row("7", 112.0, 112.3))
    clocks.observe(_worker_facts(2.0, [0.0038], 51.0), 51.001)  # a later report: θ 2.0014
    assert clocks.offset("1").offset_s == pytest.approx(2.0014, abs=1e-9)
    fourth = clocks.to_master("1", _row("7", 112.3 + gap_s, 112.6))
    other = clocks.to_master("1", _row("8", 112.3 + gap_s, 112.6))  # another user: newer θ
    assert fourth["start_unix_s"] >= third["end_unix_s"], why
    assert fourth["start_unix_s"] == pytest.approx(112.3 + gap_s - kept_theta, abs=1e-9), why
    assert other["start_unix_s"] == pytest.approx(112.3 + gap_s - 2.0014, abs=1e-9)
    assert fourth["end_unix_s"] - fourth["start_unix_s"] == pytest.approx(0.3 - gap_s)
