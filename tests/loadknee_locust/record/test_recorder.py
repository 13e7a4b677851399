"""Recorder parts without Locust: row extraction, labelling and counting, worker → master flow."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import pytest

from loadknee_core.contract import REQUEST_COLUMNS
from loadknee_locust.record.recorder import (
    REPORT_KEY,
    RequestRecorder,
    RunLog,
    StageStats,
    percentile,
    request_row,
)
from loadknee_locust.sweep.schedule import Schedule, SchedulePlan

T0 = 5_000.0


def fields(rid: str, start: float, e2e_ms: float = 100.0, outcome: str = "ok") -> dict[str, Any]:
    return {
        "request_id": rid,
        "start_unix_s": start,
        "end_unix_s": start + e2e_ms / 1000.0,
        "e2e_ms": e2e_ms,
        "ttft_ms": 10.0,
        "completion_tokens": 10,
        "outcome": outcome,
    }


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        (None, None),
        ({}, None),
        ({"loadknee": "not a dict"}, None),
        ({"other": 1}, None),
        ({"loadknee": {"request_id": "a"}}, {"request_id": "a", "worker": "3"}),
        (
            {"loadknee": {"request_id": "a", "bogus": 1, "stage": 7}},
            {"request_id": "a", "stage": 7, "worker": "3"},
        ),
    ],
)
def test_request_row(context: Any, expected: dict[str, Any] | None) -> None:
    assert request_row(context, "3") == expected


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 50, None),
        ([5.0], 95, 5.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 95, 4.8),
    ],
)
def test_percentile_matches_numpy_linear(
    values: list[float], q: float, expected: float | None
) -> None:
    got = percentile(values, q)
    assert got == expected if expected is None else math.isclose(got or 0.0, expected)


def test_stage_stats_counts_measured_rows_only_for_latency() -> None:
    st = StageStats(1)
    st.add({**fields("a", T0), "phase": "warmup"})
    st.add({**fields("b", T0 + 1.0, 200.0), "phase": "measure"})
    st.add({**fields("c", T0 + 2.0, 999.0, "http_error"), "phase": "measure"})
    st.add({**fields("d", T0 + 3.0, 300.0, "length_mismatch"), "phase": "measure"})
    st.add({**fields("e", T0 + 3.5, 900.0, "cancelled"), "phase": "measure"})  # our stop's cut
    assert (st.requests, st.measured, st.errors) == (4, 3, 1)
    assert list(st.e2e_ms) == [200.0, 300.0]
    # closed loop: 2 users × 20 tokens / 0.5 s spent in requests (Little's law)
    assert st.output_tokens_per_s(2) == pytest.approx(2 * 20 / 0.5)
    assert StageStats(2).output_tokens_per_s(4) is None  # nothing measured yet: n/a, not 0


def _plan() -> SchedulePlan:
    return SchedulePlan(
        levels=(2,), stage_seconds=10.0, warmup_seconds=2.0, cooldown_seconds=10.0,
        baseline_requests=0,
    )  # fmt: skip


def test_run_log_labels_by_start_time_and_writes_contract_csv(tmp_path: Path) -> None:
    log = RunLog(tmp_path, batch_size=1)
    log.schedule = Schedule(_plan(), T0)
    for rid, start in (("w", T0 + 1.0), ("m", T0 + 5.0), ("late", T0 + 9.9), ("cd", T0 + 10.5)):
        log.add({**fields(rid, start), "worker": "0"})
    log.schedule.advance(T0 + 20.0)  # users dropped: the cooldown starts
    log.schedule.advance(T0 + 30.0)
    log.add_stages(log.schedule.pop_closed())
    log.close()
    log.close()  # safe twice
    log.add({**fields("after", T0 + 30.0), "worker": "0"})  # dropped with a warning, no raise
    with open(tmp_path / "requests.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(REQUEST_COLUMNS)
    assert [(r["request_id"], r["stage"], r["phase"]) for r in rows] == [
        ("w", "0", "warmup"),
        ("m", "0", "measure"),
        ("late", "0", "measure"),
        ("cd", "0", "cooldown"),
    ]
    with open(tmp_path / "stages.csv", newline="") as f:
        (stage,) = list(csv.DictReader(f))
    assert (stage["stage"], stage["target_users"], stage["batch_size"]) == ("0", "2", "1")
    assert log.stage_stats(0).measured == 2


def test_worker_rows_travel_in_reports_and_the_master_writes_them(tmp_path: Path) -> None:
    worker = RequestRecorder(lambda: "1", lambda: None)
    worker.on_request(context={"loadknee": fields("x", T0 + 3.0)})
    worker.on_request(context={"something": "else"})  # not ours: ignored
    data: dict[str, Any] = {}
    worker.on_report_to_master(client_id="w1", data=data)
    assert [r["request_id"] for r in data[REPORT_KEY]] == ["x"] and worker.buffer == []
    empty: dict[str, Any] = {}
    worker.on_report_to_master(client_id="w1", data=empty)
    assert REPORT_KEY not in empty  # nothing to ship, nothing added

    run = RunLog(tmp_path)
    run.schedule = Schedule(_plan(), T0)
    master = RequestRecorder(lambda: "local", lambda: run)
    master.on_worker_report(client_id="w1", data=data)
    master.on_worker_report(client_id="w1", data={"stats": []})
    run.close()
    with open(tmp_path / "requests.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert (row["request_id"], row["worker"], row["phase"]) == ("x", "1", "measure")


def test_rows_before_the_run_opens_are_kept_for_it(tmp_path: Path) -> None:
    state: dict[str, RunLog | None] = {"run": None}
    rec = RequestRecorder(lambda: "local", lambda: state["run"])
    rec.on_request(context={"loadknee": fields("early", T0)})
    run = RunLog(tmp_path)
    state["run"] = run
    rec.drain_into(run)
    rec.on_request(context={"loadknee": {**fields("bad", T0), "start_unix_s": "not a number"}})
    run.close()
    with open(tmp_path / "requests.csv", newline="") as f:
        assert [r["request_id"] for r in csv.DictReader(f)] == ["early", "bad"]


def test_stage_stats_keep_each_measured_failure_for_the_refusal_check() -> None:
    """The sweep's red line skips a stage whose failures were all refused at once (issue 39)."""
    from loadknee_core.refusals import Failure, refusing_stage

    st = StageStats(3)
    st.add({"phase": "measure", "outcome": "ok", "e2e_ms": 400.0})
    refused = {"phase": "measure", "outcome": "http_error", "http_status": "429", "e2e_ms": 3.0}
    st.add({**refused, "error": "HTTP 429 Model is overloaded"})
    st.add({"phase": "warmup", "outcome": "timeout", "e2e_ms": 60_000.0})  # not measured
    assert list(st.failures) == [Failure("http_error", 429, "HTTP 429 Model is overloaded", 3.0)]
    assert refusing_stage(st.failures, st.e2e_ms) is True
    st.add({"phase": "measure", "outcome": "timeout", "e2e_ms": 60_000.0, "error": "timed out"})
    assert refusing_stage(st.failures, st.e2e_ms) is False  # a slow failure: the red line again
