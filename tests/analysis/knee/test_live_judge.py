"""The long-lived live judge: the same answer as ``analysis.live.answer``, many answers from one
child,
errors answered (not fatal), the child dies with its parent, and the Locust-side client asks it
from a greenlet."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis.live import answer as live
from analysis.live import judge as live_judge
from analysis.pipeline import analyze_run
from loadknee_core.slo_targets import Slo
from loadknee_locust.sweep.refine import LiveVerdict
from tests.support.knee_rundir import saturating_run as knee_saturating_run
from tests.support.paths import PROGRAMS

CAPACITY = 4  # the synthetic server runs 4 requests at once; more users only queue
PROGRAMS = PROGRAMS
PARENT = PROGRAMS / "live_judge_parent.py"  # starts a judge child, prints its pid, waits
CLIENT = PROGRAMS / "live_judge_client.py"  # asks one judge child from greenlets


def saturating_run(run_dir: Path, levels: tuple[int, ...] = (1, 2, 4, 8, 16)) -> Path:
    return knee_saturating_run(run_dir, capacity=CAPACITY, levels=levels)


def test_the_judge_answers_as_analysis_live_does(tmp_path: Path) -> None:
    run_dir = str(saturating_run(tmp_path / "run"))
    fast = live_judge.answer(json.dumps({"run_dir": run_dir}))
    assert fast == live.judge(run_dir)  # one judgement, whichever child asks
    full = analyze_run(run_dir).knee  # and the same knee as the full analysis
    assert (fast["knee_users"], fast["max_concurrency"]) == (full.knee_users, full.max_concurrency)
    assert fast["knee_users"] == 8 and fast["max_concurrency"] == CAPACITY
    # each stage's trust flags travel with it, so the live view marks what the report marks
    flags = [(s["stage"], s["trusted"], s["noisy"]) for s in fast["stages"]]
    assert flags == [(v.stage, v.trusted, v.noisy) for v in full.stages]
    noisy = {**fast, "stages": [{**s, "noisy": True} for s in fast["stages"]]}
    assert all(s.noisy for s in LiveVerdict.from_json(noisy).stages)
    assert [s.noisy for s in LiveVerdict.from_json(fast).stages] == [f[2] for f in flags]


def test_one_child_serves_many_requests_and_answers_errors(tmp_path: Path) -> None:
    run_dir = str(saturating_run(tmp_path / "run"))
    lines = io.StringIO(
        json.dumps({"run_dir": str(tmp_path / "missing")}) + "\n\nnot json\n"
        + json.dumps({"run_dir": run_dir}) + "\n"
    )  # fmt: skip
    out = io.StringIO()
    assert live_judge.serve(lines, out) == 0
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(answers) == 3  # the blank line is skipped
    assert "error" in answers[0] and "error" in answers[1]
    assert answers[2]["max_concurrency"] == CAPACITY


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:  # a zombie waiting for init to reap it is gone too
        return f.read().split(") ", 1)[1].startswith("Z")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_the_child_dies_with_its_parent() -> None:
    parent = subprocess.Popen([sys.executable, str(PARENT)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert not _gone(child)
    parent.send_signal(signal.SIGKILL)  # no cleanup code runs in the parent
    parent.wait()
    deadline = time.monotonic() + 30.0  # a bound on a liveness wait, not a speed assertion
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(child)


def test_the_locust_side_client_asks_one_child_from_greenlets(tmp_path: Path) -> None:
    run_dir = str(saturating_run(tmp_path / "run"))
    out = subprocess.run(
        [sys.executable, str(CLIENT), run_dir], capture_output=True, text=True, timeout=120,
        check=True,
    ).stdout  # fmt: skip
    got = json.loads(out.strip().splitlines()[-1])
    assert got["first"] == CAPACITY and got["second"] == 8
    assert got["same_child"] and got["missing"] is None and got["closed"]
    assert got["web_ui"] == CAPACITY  # the web UI asks through the same LiveJudge
    assert got["ticks"] > 0  # the asking greenlet waited on a pipe, not the hub


def test_the_sweeps_slos_travel_in_run_json_to_the_judge_and_the_analysis(tmp_path: Path) -> None:
    """``loadknee run --slo`` records the targets in run.json: the live judge answers the SLO
    capacity and the first stage that breaks them (what the sweep refines between), and
    ``analyze`` reports the same capacity without the targets typed again."""
    run_dir = saturating_run(tmp_path / "run")  # e2e 400 ms up to 4 users, 800 at 8, 1600 at 16
    info = json.loads((run_dir / "run.json").read_text())
    info["parameters"] = {"llm_slo": "e2e_p95_ms=600"}
    (run_dir / "run.json").write_text(json.dumps(info))
    answer = live.judge(str(run_dir))
    assert (answer["slo_capacity"], answer["slo_break_users"]) == (CAPACITY, 8)
    assert (LiveVerdict.from_json(answer).slo_capacity, LiveVerdict.from_json(answer)
            .slo_break_users) == (CAPACITY, 8)  # fmt: skip
    slo = analyze_run(run_dir).slo
    assert slo is not None and slo.capacity == CAPACITY
    assert slo.params.slos == (Slo("e2e", 95.0, 600.0),)
    info["parameters"] = {}  # no targets given to the sweep: nothing judged, nothing to refine
    (run_dir / "run.json").write_text(json.dumps(info))
    answer = live.judge(str(run_dir))
    assert (answer["slo_capacity"], answer["slo_break_users"]) == (None, None)
    assert analyze_run(run_dir).slo is None
