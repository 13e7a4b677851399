"""The fault suite: per fault mode of the simulator, the server's own count of faulted requests
equals the rows with the right outcome, nothing is doubled or lost, and the analysis names the
failure (issue 13, item 9).

Each case: ``loadknee sim --fault MODE --fault-share 0.25 --fault-above-in-flight 2``, a short
sweep of 2 then 4 users through ``loadknee run`` (real Locust over loopback): the fault starts at
the 4-user stage, so the analysis must put the red line there (for the modes that fail requests)
and keep the 2-user stage clean; then the rows against ``/sim/log`` by request id. Only a real
run shows what the client makes of each fault; the sweeps (a few users each, mostly waiting on
the simulator) run four at a time from one fixture, each against its own simulator.
"""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from analysis.diagnosis.facts import FailureKind, FailureMix
from analysis.pipeline import analyze_run
from analysis.report.diagnosis_words import failures_text
from analysis.stages.data_check import RowsFact
from loadknee_core.contract import REQUEST_COLUMNS
from loadknee_locust.sim.faults import FAULT_MODES
from loadknee_locust.sim.launch import SimProcess
from tests.support.run_support import assert_each_served_once, child_env, only_run_dir, read_csv

pytestmark = pytest.mark.slow

#: the outcome a correct client records for each mode (loadknee_locust/sim/faults.py's list)
EXPECTED_OUTCOME = {
    "http_500": "http_error",
    "http_503": "http_error",
    "http_429": "http_error",
    "reset_before_read": "connect_error",
    "reset_after_read": "connect_error",
    "cut_stream": "incomplete",
    "malformed_sse": "malformed",
    "error_object": "stream_error",
    "stall": "timeout",
    "trickle": "ok",
    "wrong_usage": "length_mismatch",
}
assert set(EXPECTED_OUTCOME) == set(FAULT_MODES) - {"none"}, "a fault mode the suite skips"
#: the kind of failure the analysis counts for each failing mode in the stage's failures
NAMED = {
    "http_500": FailureKind("http_error", 500),
    "http_503": FailureKind("http_error", 503),
    "http_429": FailureKind("http_error", 429),
    "reset_before_read": FailureKind("connect_error"),
    "reset_after_read": FailureKind("connect_error"),
    "cut_stream": FailureKind("incomplete"),
    "malformed_sse": FailureKind("malformed"),
    "error_object": FailureKind("stream_error"),
    "stall": FailureKind("timeout"),
}


#: sweeps at once: each holds 2 then 4 users, so the machine stays far from busy
AT_ONCE = 4


def _settled_load(sim: SimProcess, rows: int) -> list[dict]:
    """The server's records of the load (probes carry no id), once its handlers finished: a
    stalled one logs itself only when its sleep ends, after the client gave up on it."""
    deadline = time.monotonic() + 15
    while True:
        served = [r for r in sim.log() if len(r["request_id"]) == 16]
        if len(served) >= rows or time.monotonic() > deadline:
            return served
        time.sleep(0.2)


def _sweep(mode: str, out: Path) -> tuple[Path, list[dict[str, str]], list[dict]]:
    """One fault mode's sweep: its run directory, its rows, and the server's records of them."""
    with SimProcess.start("fast", fault=mode, fault_share=0.25, fault_stall_s=3.0,
                          fault_above_in_flight=2) as sim:  # fmt: skip
        cmd = [sys.executable, "-m", "loadknee_locust", "run", "--no-analyze", "--host", sim.url,
               "--levels", "2,4", "--stage-seconds", "3", "--no-refine",
               "--warmup-seconds", "0.5", "--cooldown-seconds", "0.5",
               "--baseline-requests", "0", "--output-tokens", "16", "--out", str(out),
               "--stop-timeout", "8", "--llm-request-timeout", "1.5",
               # tests the rows' outcomes, not loadknee predict: skip the probe's ~2 s a sweep
               "--no-concurrency-probe"]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=child_env())
        assert done.returncode == 0, done.stdout[-3000:]
        rows = read_csv(only_run_dir(out) / "requests.csv", REQUEST_COLUMNS)
        served = _settled_load(sim, sum(r["outcome"] != "cancelled" for r in rows))
    return only_run_dir(out), rows, served


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Future[Any]]:
    """Every mode's sweep, ``AT_ONCE`` at a time; a mode's failure is raised in its own test."""
    with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        return {
            mode: pool.submit(_sweep, mode, tmp_path_factory.mktemp(mode))
            for mode in sorted(EXPECTED_OUTCOME)
        }


@pytest.mark.parametrize("mode", sorted(EXPECTED_OUTCOME))
def test_server_count_equals_rows_with_the_right_outcome(
    mode: str, sweeps: dict[str, Future[Any]]
) -> None:
    run_dir, rows, served = sweeps[mode].result()
    assert_each_served_once(rows, [r["request_id"] for r in served])  # none doubled or lost
    faulted = {r["request_id"] for r in served if r["outcome"] == "faulted"}
    assert all(r["fault"] == mode for r in served if r["outcome"] == "faulted")
    assert len(faulted) >= 2, f"only {len(faulted)} of {len(served)} faulted"
    expected = EXPECTED_OUTCOME[mode]
    with_outcome = {r["request_id"] for r in rows if r["outcome"] == expected}
    assert not faulted & {r["request_id"] for r in rows if r["stage"] == "0"}, (
        "the 2-user stage never has more than 2 in flight"
    )
    knee = analyze_run(run_dir).knee
    last = knee.stages[-1]
    counts = f"{len(served)} | {len(faulted)} | {len(rows)} | {len(with_outcome)} {expected}"
    said = f"{last.verdict} | {knee.red_line_users} | {failures_text(last.failures) or '-'}"
    print(f"| {mode} | {counts} | {said} |")  # the closing note's fault table, with -n 0 -s
    if expected == "ok":
        assert faulted <= with_outcome
        assert knee.red_line_users is None, knee.summary
        return
    assert with_outcome == faulted, (mode, len(with_outcome), len(faulted))
    first, stage = knee.stages[0], knee.stages[-1]
    assert (first.target_users, stage.target_users) == (2, 4)
    if expected == "length_mismatch":
        rows = [r for r in stage.reasons if isinstance(r, RowsFact)]
        assert rows and rows[0].excluded > 0, stage.reasons
        assert knee.red_line_users is None, knee.summary
        return
    mix = stage.failures
    assert isinstance(mix, FailureMix) and NAMED[mode] in dict(mix.kinds), mix
    # the red line where the fault starts, and the stage before it clean
    assert knee.red_line_users == 4, knee.summary
    assert first.verdict != "red_line" and not first.failures, first.failures
