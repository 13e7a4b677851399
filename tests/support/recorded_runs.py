"""Run directories recorded once per test run and read by every test file that needs one.

Several e2e files check different things on the same kind of sweep (the server's count of
requests against the rows, a stage rule, the headroom a run allows). Each kind below is recorded
the first time a test asks for it and then only read: a test that writes into a run (``loadknee
analyze`` adds ``report/``) copies it first.

Under pytest-xdist (``-n 2 --dist loadfile``) every worker process has its own session fixtures,
so a session fixture alone would record a kind once per worker. The recordings therefore live in
the session's shared temporary folder (the parent of each worker's own; without xdist, the
session's own), each kind behind a ``flock``: the first process to ask records it while the
others wait, then all read the same files. A recording that fails leaves nothing behind: the
test that asked fails with the command's output, and the next one to ask records it again.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loadknee_locust.sim.launch import SimProcess
from tests.support.knee_simdriver import DriveSpec, drive_sim
from tests.support.run_support import child_env

#: the API key the recorded wrapper runs send (a test checks it reached no file)
SECRET = "sk-loadknee-test-DO-NOT-WRITE-0123456789"

#: the drive_sim sweep of a 4-slot ``fast`` simulator: c* = 4 sits on a tested level. Twice the
#: slots puts the tail on the 2x line by construction (every request waits one service time),
#: so the baseline gets the 20 requests the method asks for: with 6 its P95 was one slow
#: request, and a busy suite (ci33) read 8 users at 1.96x (the product now says "cannot tell"
#: there: analysis.advice.standing.tail_in_doubt)
SLOTS4_LEVELS = (1, 2, 4, 8, 16)
SLOTS4_SPEC = DriveSpec(levels=SLOTS4_LEVELS, warmup_s=0.4, measure_s=1.5, baseline_requests=20)
#: ``--stage-seconds auto`` between these bounds
AUTO_MIN_S, AUTO_MAX_S = 3.0, 15.0


@dataclass(frozen=True)
class RecordedRun:
    """A recorded run directory, what its command printed, and the simulator's ``/sim/log``
    taken after the run (one record per request it served: the server-side truth)."""

    path: Path
    output: str
    sim_log: list[dict[str, Any]]


def _loadknee_run(sim: SimProcess, out: Path, *args: str, env: dict[str, str]) -> str:
    cmd = [sys.executable, "-m", "loadknee_locust", "run", "--host", sim.url, *args]
    done = subprocess.run(
        [*cmd, "--out", str(out), "--run-id", "run"], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=240, env=env,
    )  # fmt: skip
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout[-4000:]}"
    return done.stdout


def _slots4_drive(folder: Path) -> tuple[str, list[dict[str, Any]]]:
    """drive_sim through 1–16 users against 4 slots (tests/e2e/test_knee_sim.py's ``slots-4``
    case, the capacity tests/e2e/test_traffic_sim.py reads)."""
    with SimProcess.start("fast", max_num_seqs=4) as sim:
        drive_sim(sim.url, SLOTS4_SPEC, folder / "run", sim_preset="fast")
        return "", sim.log()


def _auto_local(folder: Path) -> tuple[str, list[dict[str, Any]]]:
    """``loadknee run --stage-seconds auto`` in one process (tests/e2e/test_run_auto_stage.py;
    tests/e2e/test_accounting.py reconciles its server count)."""
    with SimProcess.start("fast") as sim:
        output = _loadknee_run(
            sim, folder,
            "--levels", "2,8", "--stage-seconds", "auto", "--stage-min-seconds", f"{AUTO_MIN_S:g}",
            "--stage-max-seconds", f"{AUTO_MAX_S:g}", "--warmup-seconds", "1",
            "--cooldown-seconds", "0.5", "--baseline-requests", "3", "--input-tokens", "32",
            "--output-tokens", "16", "--no-refine", "--stop-after-knee", "-1",
            "--stop-timeout", "10", env=child_env(),
        )  # fmt: skip
        return output, sim.log()


def _count_two_workers(folder: Path) -> tuple[str, list[dict[str, Any]]]:
    """``loadknee run --processes 2 --stage-requests 12`` (Locust's name for ``--workers``), the
    API key from a named variable (tests/e2e/test_run_local.py's wrapper test;
    tests/e2e/test_accounting.py reconciles its server count)."""
    with SimProcess.start("fast") as sim:
        output = _loadknee_run(
            sim, folder,
            "--processes", "2", "--levels", "1,2", "--stage-requests", "12",
            "--warmup-seconds", "0.3", "--cooldown-seconds", "0.5", "--baseline-requests", "2",
            "--input-tokens", "32", "--output-tokens", "12",
            "--llm-api-key-env", "LOADKNEE_TEST_KEY",  # passed through to Locust unchanged
            env=child_env(LOADKNEE_TEST_KEY=SECRET),
        )  # fmt: skip
        return output, sim.log()


#: each kind's recorder: writes ``folder/run`` and returns (its output, the sim's log)
KINDS: dict[str, Callable[[Path], tuple[str, list[dict[str, Any]]]]] = {
    "slots4-drive": _slots4_drive,
    "auto-local": _auto_local,
    "count-two-workers": _count_two_workers,
}


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """The folder every process of this test run shares: under xdist the parent of the
    worker's basetemp (the controller's, one per session), else the session's own."""
    base = factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "recorded-runs"
    root.mkdir(exist_ok=True)
    return root


def recorded(root: Path, kind: str) -> RecordedRun:
    """The run of ``kind``, recorded now if no process of this test run has recorded it."""
    record = KINDS[kind]
    folder = root / kind
    with (root / f"{kind}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = folder / "done.json"
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a failed try's leftovers
            folder.mkdir()
            output, log = record(folder)
            done.write_text(json.dumps({"output": output, "sim_log": log}))
    saved = json.loads(done.read_text())
    return RecordedRun(folder / "run", saved["output"], saved["sim_log"])
