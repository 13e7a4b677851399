"""Real Locust, one process, against the simulator: every served request recorded once and rightly
labelled; the ``loadknee run`` wrapper; no API key on disk; a run killed with SIGKILL parses."""

from __future__ import annotations

import csv
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from loadknee_core.contract import REQUEST_COLUMNS
from loadknee_locust.client.streamread import KERNEL_STAMPS, kernel_stamps_work
from tests.support.recorded_runs import SECRET
from tests.support.run_support import (
    assert_matches_sim,
    check_run,
    child_env,
    locust_cmd,
    only_run_dir,
    read_run_dir,
    run,
    sweep_args,
)

pytestmark = pytest.mark.slow


def _files_text(path: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in path.rglob("*") if p.is_file())


def test_plain_locust_headless_records_every_request(sim_server, tmp_path: Path) -> None:
    sim = sim_server(preset="fast")
    out = tmp_path / "runs"
    # no --stop-timeout on purpose: the plugin must set one (and say so) so nothing is lost
    text = run(
        locust_cmd("--headless", "--host", sim.url, *sweep_args(out), "--llm-run-id", "plain"),
        env=child_env(OPENAI_API_KEY=SECRET),
    )
    # words are the product: the warning a user reads when the plugin sets --stop-timeout
    assert "--stop-timeout was not set" in text
    rd = read_run_dir(only_run_dir(out))
    assert rd.path.name == "plain"
    check_run(rd, levels=[1, 2], baseline=3)
    assert_matches_sim(rd, sim.log())
    assert {r["worker"] for r in rd.requests} == {"local"}
    assert rd.info["mode"] == "local" and rd.info["levels"] == [1, 2]
    assert rd.info["stop_reason"] == "duration"
    assert rd.info["requests_recorded"] == len(rd.requests)
    assert SECRET not in _files_text(rd.path)


def test_loadknee_run_wrapper_two_workers_count_mode_default_users(recorded_run) -> None:
    """The wrapper end to end: B's users, two worker processes, 12 requests per level. Only a
    real run shows the progress lines, the workers' rows and the stamps; the sweep is the
    recorded ``count-two-workers`` run (tests/support/recorded_runs.py), which
    tests/e2e/test_accounting.py also reconciles with the server's count."""
    recording = recorded_run("count-two-workers")
    out, text = recording.path.parent, recording.output
    lines = text.strip().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("run directory: "))
    run_dir = Path(lines[at].split(": ", 1)[1])
    assert run_dir.parent == out.resolve()
    # then the answer, as `loadknee analyze` prints it, and no "next:" command to type
    # words are the product: the progress lines a user reads while it runs
    assert lines[at + 1] == f"[loadknee] analysing {run_dir} …"
    # (a slow machine also shows the analysis's own progress lines, on stderr, before it)
    answer = [line for line in lines[at + 2 :] if not line.startswith("[analyze] ")]
    assert answer[0].startswith("DEPLOY: "), lines[at:]
    assert (run_dir / "report" / "knee.json").exists()
    assert not any(line.startswith("next: ") for line in lines)
    # words are the product: the progress lines a user reads while it runs
    assert any(line.startswith("[loadknee] stage 2/2 (2 users) measure") for line in lines)
    # words are the product: the progress lines a user reads while it runs
    assert any(line.startswith("[loadknee] baseline (1 user) ") for line in lines)
    # a counted window says how far it is in measured requests, never "13/12" (issue 41)
    counted = re.compile(r"\| (\d+ of 12 measured|\d+ measured \(12 asked\)); ")
    assert any(counted.search(line) for line in lines)
    assert not re.search(r"\b1 (requests|errors|users)\b|level\(s\)|\d+/\d+ requests", text)
    # Locust's own log lines stay off the terminal, in the run directory's locust.log
    assert not any(re.match(r"\[[^\]]+\] [^/\s]+/(INFO|WARNING)/", line) for line in lines)
    # words are the product: the plugin's own line in locust.log, where Locust's logging goes
    assert "loadknee: run directory" in (run_dir / "locust.log").read_text()
    # Locust's own closing tables (bucketed percentiles) stay behind --verbose
    # words are the product: Locust's own tables, which stay behind --verbose
    assert "Response time percentiles" not in text and "Aggregated" not in text
    rd = read_run_dir(run_dir)
    check_run(rd, levels=[1, 2], baseline=2, stop_reason="request_count")
    assert {st["stop_reason"] for st in rd.stages} == {"request_count"}
    measured = Counter(r["stage"] for r in rd.requests if r["phase"] == "measure")
    assert measured["1"] >= 12 and measured["2"] >= 12
    assert {r["worker"] for r in rd.requests} <= {"0", "1"}
    served = {str(rec["request_id"]) for rec in recording.sim_log}
    assert {r["request_id"] for r in rd.requests} <= served  # calibration probes are not rows
    assert {r["outcome"] for r in rd.requests} == {"ok"}
    assert rd.info["prompt_source"]["kind"] == "fixed"
    mode = "kernel" if KERNEL_STAMPS and kernel_stamps_work() else "readline"
    stamps = rd.info["prompt_source"]["stream_stamps"]  # summed over both workers
    # a short body that was complete with its headers is "with_headers" (nothing to stamp apart);
    # a busy machine makes that happen: it is no fallback, readline in kernel mode would be one
    assert mode in stamps and set(stamps) <= {mode, "with_headers"}, stamps
    # every recorded stream was stamped one of those two ways (+ the cooldown's unrecorded ones);
    # a busy machine can turn one of 97 into "with_headers", which the kernel count alone misses
    assert stamps[mode] + stamps.get("with_headers", 0) >= len(rd.requests), stamps
    assert rd.info["model"] == "sim-llm"  # discovered on a worker, shipped to the master
    assert rd.info["mode"] == "master" and rd.info["worker_count"] == 2
    assert rd.info["parameters"]["llm_levels"] == "1,2"
    assert SECRET not in _files_text(rd.path)


def test_sigkill_leaves_csvs_that_parse(sim_server, tmp_path: Path) -> None:
    sim = sim_server(preset="fast")
    out = tmp_path / "runs"
    cmd = locust_cmd(
        "--headless", "--host", sim.url, *sweep_args(out, levels="4", stage_s=30.0, baseline=0)
    )
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env()
    )
    try:
        deadline = time.monotonic() + 30.0
        requests_csv = None
        while time.monotonic() < deadline:
            time.sleep(0.5)
            dirs = list(out.glob("*/requests.csv")) if out.exists() else []
            if dirs and dirs[0].read_text().count("\n") > 30:
                requests_csv = dirs[0]
                break
        assert requests_csv is not None, "no rows written within 30 s"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with open(requests_csv, newline="") as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == REQUEST_COLUMNS
    assert len(rows) > 30
    assert all(len(r) == len(REQUEST_COLUMNS) for r in rows[1:])
    with open(requests_csv.parent / "stages.csv", newline="") as f:
        assert len(list(csv.reader(f))) == 1  # header only: no stage had ended
    assert (requests_csv.parent / "run.json").read_text().strip().endswith("}")


@pytest.mark.parametrize(
    ("extra", "stages", "reason"),
    [
        # every request takes > 1 ms: the baseline crosses the red line, the sweep stops after it
        (["--llm-red-line-p95-ms", "1", "--llm-baseline-requests", "2"], 1, "red_line"),
        # Locust's --run-time, which Locust itself ignores with a shape, cuts the first level
        (["--run-time", "3", "--llm-baseline-requests", "0"], 1, "time_limit"),
    ],
)
def test_early_stops(
    sim_server, tmp_path: Path, extra: list[str], stages: int, reason: str
) -> None:
    sim = sim_server(preset="fast")
    out = tmp_path / "runs"
    args = sweep_args(out, levels="1,2", stage_s=20.0, baseline=None)
    run(locust_cmd("--headless", "--host", sim.url, "--stop-timeout", "10", *args, *extra))
    rd = read_run_dir(only_run_dir(out))
    assert len(rd.stages) == stages
    assert rd.stages[-1]["stop_reason"] == reason == rd.info["stop_reason"]
    assert_matches_sim(rd, sim.log())


def test_bad_sweep_options_fail_clearly_before_any_file(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    cmd = locust_cmd(
        "--headless", "--host", "http://127.0.0.1:9", "--llm-levels", "1,x", "--llm-out", str(out)
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=child_env())
    assert proc.returncode == 2
    # words are the product: the message a user reads for bad input
    assert "cannot run the sweep: --llm-levels must be comma-separated integers" in proc.stderr
    assert not out.exists()
