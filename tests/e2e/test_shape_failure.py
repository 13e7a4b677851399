"""A bug that escapes the shape's tick ends the sweep, with its traceback, instead of hanging
the run with no users; the stage that ran stays readable (real Locust against the simulator)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from loadknee_core.contract import STAGE_COLUMNS
from tests.support.run_support import (
    HERE,
    child_env,
    locust_cmd,
    only_run_dir,
    read_csv,
    sweep_args,
)

pytestmark = pytest.mark.slow


def test_an_error_in_the_scheduler_ends_the_run_with_its_traceback(sim_server, tmp_path: Path):
    sim = sim_server("fast")
    cmd = locust_cmd(
        "--headless", "--host", sim.url, "--stop-timeout", "5",
        *sweep_args(tmp_path, levels="1,2,4", baseline=0),
        locustfile=str(HERE / "broken_shape_locustfile.py"),
    )  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=child_env())
    out = done.stdout + done.stderr
    assert done.returncode == 2, out[-3000:]
    # words are the product: the error a user reads when the sweep's scheduler fails
    assert "the sweep's scheduler failed" in out and "simulated scheduler bug" in out, out[-3000:]
    run_dir = only_run_dir(tmp_path)
    info = json.loads((run_dir / "run.json").read_text())
    assert info["stop_reason"] == "interrupted" and info["end_unix_s"], info
    stages = read_csv(run_dir / "stages.csv", STAGE_COLUMNS)
    assert [s["target_users"] for s in stages][:1] == ["1"], stages
