"""Ctrl-C, SIGTERM and SIGKILL of the wrapper against the simulator: a graceful, complete stop.

Each test runs real Locust (through ``loadknee run`` or plain ``locust``) against ``loadknee sim``
over loopback with long stages, signals it in the middle of the first stage, and checks the run
directory against the simulator's own log:

* the first SIGINT / SIGTERM: every request the server saw during the load has its row (requests
  in flight finished; none aborted), ``run.json`` has ``stop_reason: interrupted`` and an end,
  the running stage is in ``stages.csv`` with stop reason ``interrupted`` (partial);
* a second SIGINT stops at once and still leaves readable files;
* SIGKILL of the wrapper: the server's request count stops growing (no orphaned load).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from analysis.pipeline import analyze_run
from analysis.report.screen import uncited
from analysis.report.stage_words import provisional_text
from analysis.stages.run_cut import RunCut
from loadknee_core.contract import REQUEST_COLUMNS, STAGE_COLUMNS
from loadknee_locust.sim.launch import SimProcess
from tests.support.late_client import late_cannot_tell
from tests.support.run_support import child_env, only_run_dir, read_csv

pytestmark = pytest.mark.slow

SWEEP = ["--levels", "2,4", "--stage-seconds", "60", "--warmup-seconds", "0.5"]
SWEEP += ["--cooldown-seconds", "0.5", "--baseline-requests", "0", "--output-tokens", "48"]


def _wrapper(sim: SimProcess, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "loadknee_locust", "run", "--no-analyze",
            "--host", sim.url, *SWEEP,
            "--out", str(out), "--stop-timeout", "20", *extra,
            # tests the signals, not loadknee predict: skip the probe's ~2 s
            "--no-concurrency-probe"]  # fmt: skip


def _plain_locust(sim: SimProcess, out: Path) -> list[str]:
    from loadknee_locust.commands.run import default_locustfile

    return [sys.executable, "-m", "locust", "-f", default_locustfile(), "--host", sim.url,
            "--headless", "--only-summary", "--stop-timeout", "20", "--llm-levels", "2,4",
            "--llm-stage-seconds", "60", "--llm-warmup-seconds", "0.5",
            "--llm-cooldown-seconds", "0.5", "--llm-baseline-requests", "0",
            "--llm-output-tokens", "48", "--llm-out", str(out)]  # fmt: skip


@pytest.fixture
def started() -> Iterator[Callable[[list[str]], subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(cmd: list[str]) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env()
        )
        procs.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _load_requests(sim: SimProcess) -> list[dict[str, Any]]:
    """The server's records of load requests: the users send a 16-hex ``X-Request-Id``; the
    calibration probes send none, and the simulator names those with 32 hex digits."""
    return [r for r in sim.log() if len(r["request_id"]) == 16]


def _wait_for_load(sim: SimProcess, proc: subprocess.Popen[bytes], at_least: int) -> None:
    deadline = time.monotonic() + 90
    while len(_load_requests(sim)) < at_least:
        assert proc.poll() is None, f"the run ended early (exit {proc.returncode})"
        assert time.monotonic() < deadline, "no load reached the server"
        time.sleep(0.2)


def _check_interrupted(out: Path, sim: SimProcess) -> list[dict[str, str]]:
    run_dir = only_run_dir(out)
    info = json.loads((run_dir / "run.json").read_text())
    stages = read_csv(run_dir / "stages.csv", STAGE_COLUMNS)
    rows = read_csv(run_dir / "requests.csv", REQUEST_COLUMNS)
    assert info["stop_reason"] == "interrupted"
    assert info["end_unix_s"] and info["end_unix_s"] >= info["start_unix_s"]
    assert info["requests_recorded"] == len(rows)
    assert stages, "the running stage is missing from stages.csv"
    assert stages[-1]["stop_reason"] == "interrupted"
    assert float(stages[-1]["measure_end_unix_s"]) <= float(info["end_unix_s"])
    return rows


@pytest.mark.parametrize("how", ["wrapper SIGINT", "wrapper SIGTERM", "plain locust SIGTERM"])
def test_first_signal_stops_gracefully(how: str, sim_server, started, tmp_path: Path) -> None:
    sim = sim_server("fast")
    sig = signal.SIGINT if "SIGINT" in how else signal.SIGTERM
    cmd = _wrapper(sim, tmp_path) if how.startswith("wrapper") else _plain_locust(sim, tmp_path)
    proc = started(cmd)
    _wait_for_load(sim, proc, at_least=6)
    proc.send_signal(sig)
    assert proc.wait(timeout=60) == 128 + sig
    rows = _check_interrupted(tmp_path, sim)
    served = _load_requests(sim)
    first_row = min(float(r["start_unix_s"]) for r in rows)
    assert {r["request_id"] for r in served} == {r["request_id"] for r in rows}, (
        "requests in flight lost their rows"
    )
    assert first_row > 0
    assert sim.stats()["outcomes"]["aborted"] == 0, "requests in flight were cut"
    run_dir = str(only_run_dir(tmp_path))
    analyzed = subprocess.run(
        [sys.executable, "-m", "loadknee_locust", "analyze", run_dir, "--quiet"],
        capture_output=True, text=True, timeout=120, env=child_env(),
    )  # fmt: skip
    analysis = analyze_run(run_dir)
    # a busy machine: "cannot tell" (exit 3) only with its evidence (ci83: the load generator
    # 85 ms late on average at 2 users, host load 3.3 on 2 cores); the cut is said either way
    late = analyzed.returncode == 3 and late_cannot_tell(analysis)
    assert analyzed.returncode == 0 or late, analyzed.stderr
    cut = analysis.recommendations.provisional
    assert isinstance(cut, RunCut) and cut.reason == "interrupted", cut
    assert 4 in cut.levels_not_run or (cut.stage, cut.users) == (1, 4), cut
    said = provisional_text(cut)  # on the screen and in knee.json (its words: stage_words golden)
    assert " ".join(uncited(said).split()) in " ".join(analyzed.stdout.split()), analyzed.stdout
    knee_json = json.loads((Path(run_dir) / "report" / "knee.json").read_text())
    assert knee_json["recommendations"]["provisional"] == said


def test_second_sigint_stops_at_once_with_readable_files(
    sim_server, started, tmp_path: Path
) -> None:
    sim = sim_server("fast", decode_base_ms=60.0)  # slow tokens: requests stay in flight
    proc = started(_wrapper(sim, tmp_path))
    _wait_for_load(sim, proc, at_least=3)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 128 + signal.SIGINT
    rows = _check_interrupted(tmp_path, sim)
    assert len(rows) <= len(_load_requests(sim))


def _locust_children(marker: str) -> list[int]:
    """Processes whose command line names ``marker`` (this test's own output folder)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline and "locust" in cmdline:
                pids.append(int(entry.name))
    return pids


@pytest.mark.parametrize("workers", [0, 2])
def test_sigkill_of_the_wrapper_stops_the_load(
    workers: int, sim_server, started, tmp_path: Path
) -> None:
    sim = sim_server("fast")
    out = tmp_path / "runs-orphan-check"
    proc = started(_wrapper(sim, out, "--workers", str(workers)))
    try:
        _wait_for_load(sim, proc, at_least=6)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 30
        while _locust_children(str(out)):
            assert time.monotonic() < deadline, "Locust outlived the wrapper"
            time.sleep(0.2)
        settled = len(_load_requests(sim))
        time.sleep(2.0)  # not a timing assert: any load left running would add requests here
        assert len(_load_requests(sim)) == settled
    finally:
        for pid in _locust_children(str(out)):
            os.kill(pid, signal.SIGKILL)
    info = json.loads((only_run_dir(out) / "run.json").read_text())
    assert info["stop_reason"] == "interrupted"
