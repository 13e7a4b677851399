"""Bad input never hangs or floods: every case ends before the sweep with one message and an exit
code other than 0, and the server sees no load.

Each case runs ``loadknee run`` (real Locust) against the simulator with a short sweep; the
simulator's own log says how many load requests reached it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis.pipeline import analyze_run
from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.plugin.validate import host_problem, option_problems
from tests.support.run_support import child_env, reaped

SWEEP = ["--levels", "1", "--stage-seconds", "3", "--warmup-seconds", "0.5",
         "--cooldown-seconds", "0.5", "--baseline-requests", "0"]  # fmt: skip


def _write_cr_only(path: Path) -> Path:
    path.write_bytes(b"prompt,max_tokens\rhello there,10\rsecond prompt,12\r")
    return path


def _write_binary(path: Path) -> Path:
    path.write_bytes(bytes(range(256)) * 8)
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "extra", "message"),
    [
        ("timeout -1", ["--llm-request-timeout", "-1"], "--request-timeout must be > 0"),
        ("timeout 0", ["--llm-request-timeout", "0"], "--request-timeout must be > 0"),
        ("CR-only CSV", ["--prompt-log", "CR"], "CR only"),
        ("binary CSV", ["--prompt-log", "BIN"], "not text"),
    ],
)
def test_bad_input_ends_before_load_with_one_message(
    case: str, extra: list[str], message: str, sim_server, tmp_path: Path
) -> None:
    sim = sim_server("fast")
    if "CR" in extra:
        extra = ["--prompt-log", str(_write_cr_only(tmp_path / "log.csv"))]
    if "BIN" in extra:
        extra = ["--prompt-log", str(_write_binary(tmp_path / "log.csv"))]
    cmd = [sys.executable, "-m", "loadknee_locust", "run", "--no-analyze",
           "--host", sim.url, *SWEEP,
           "--out", str(tmp_path / "runs"), "--stop-timeout", "5", *extra]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=child_env())
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-3000:]
    assert output.count(message) == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    load = [r for r in sim.log() if len(r["request_id"]) == 16]  # users' ids; probes carry none
    assert load == [], f"{len(load)} load requests reached the server"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"request_timeout": -1.0}, "--llm-request-timeout must be > 0 seconds, got -1"),
        ({"request_timeout": 0.0}, "--llm-request-timeout must be > 0 seconds, got 0"),
        ({"request_timeout": float("nan")}, "--llm-request-timeout must be > 0"),
        ({"sample_interval": 0.0}, "--llm-sample-interval must be > 0"),
        ({"stage_seconds": -5.0}, "--llm-stage-seconds must be >= 0"),
        ({"red_line_error_pct": 150.0}, "between 0 and 100"),
        ({"red_line_p95_ms": -1.0}, "--llm-red-line-p95-ms must be >= 0"),
        ({"batch_size": 0}, "--llm-batch-size must be >= 1"),
        ({"levels": "1,0"}, "each >= 1"),
    ],
)
def test_each_bad_option_is_named(changes: dict, expected: str) -> None:
    problems = option_problems(LlmOptions(**changes), "http://127.0.0.1:8000")
    assert len(problems) == 1 and expected in problems[0], problems


def test_good_options_pass() -> None:
    assert option_problems(LlmOptions(), "https://example.test:8443/v1") == []


@pytest.mark.parametrize(
    "host", ["127.0.0.1:8000", "localhost", "ftp://x.test", "http://", "http://h:99999"]
)
def test_a_host_without_scheme_or_name_is_refused(host: str) -> None:
    assert host_problem(host) is not None


@pytest.mark.slow
def test_a_target_failing_every_request_is_backed_off_then_the_sweep_stops(
    sim_server, tmp_path: Path
) -> None:
    """The simulator crashes mid-stage and stays down (HTTP 503 to everything): the users back
    off instead of spinning, and the sweep stops at the red line with exit code 3."""
    sim = sim_server("fast", restart_s=600.0)
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "loadknee_locust", "run", "--no-analyze",
           "--host", sim.url, "--levels", "4",
           "--stage-seconds", "120", "--warmup-seconds", "0.5", "--cooldown-seconds", "0.5",
           "--baseline-requests", "0", "--out", str(out), "--stop-timeout", "5",
           # tests the back-off, not loadknee predict: skip the probe's ~2 s
           "--no-concurrency-probe"]  # fmt: skip
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=child_env())  # fmt: skip
    with reaped(child) as proc:
        deadline = time.monotonic() + 60
        while sum(len(r["request_id"]) == 16 for r in sim.log()) < 20:
            assert proc.poll() is None and time.monotonic() < deadline, "no load"
            time.sleep(0.2)
        sim.crash()
        output, _ = proc.communicate(timeout=90)
    assert proc.returncode == 3, output[-3000:]
    # words are the product: the stop message a user reads when a server fails every request
    assert "all of the last" in output and "stopping the sweep" in output
    failed = [r for r in sim.log() if len(r["request_id"]) == 16 and r["status"] == 503]
    assert len(failed) >= 20
    span = max(r["arrival_unix_s"] for r in failed) - min(r["arrival_unix_s"] for r in failed)
    per_user_per_s = len(failed) / 4 / max(span, 1.0)
    assert per_user_per_s < 10, f"{len(failed)} failed requests in {span:.1f} s: a hot loop"
    run_dir = next(p for p in out.iterdir() if p.is_dir())
    info = json.loads((run_dir / "run.json").read_text())
    assert info["stop_reason"] == "red_line"
    analysis = analyze_run(run_dir)
    assert analysis.knee.stages[-1].verdict == "red_line"


def test_the_back_off_grows_over_a_streak_and_resets_on_success() -> None:
    from loadknee_locust.client.backoff import FREE_FAILURES, MAX_PAUSE_S, FailureBackoff

    backoff = FailureBackoff()
    pauses = [backoff.after(True) for _ in range(FREE_FAILURES + 12)]
    assert pauses[:FREE_FAILURES] == [0.0] * FREE_FAILURES  # a few rejections cost nothing
    grown = pauses[FREE_FAILURES:]
    assert grown == sorted(grown) and grown[0] > 0 and grown[-1] == MAX_PAUSE_S
    assert backoff.after(False) == 0.0 and backoff.after(True) == 0.0  # a success resets it
