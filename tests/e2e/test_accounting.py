"""Every request loadknee sends is counted: the server's own count reconciles with the run
directory alone, with workers too (issue 13 finding 7: each worker's calibration probes were
replaced by the last worker's count)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadknee_locust.contract import REQUEST_COLUMNS
from tests.support.run_support import assert_each_served_once, child_env, only_run_dir, read_csv

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("workers", [0, 2])
def test_server_count_equals_rows_plus_setup_requests(
    workers: int, sim_server, tmp_path: Path
) -> None:
    sim = sim_server("fast")
    cmd = [sys.executable, "-m", "loadknee_locust", "run", "--host", sim.url, "--levels", "1,2",
           "--stage-seconds", "2", "--warmup-seconds", "0.5", "--cooldown-seconds", "0.5",
           "--baseline-requests", "0", "--workers", str(workers), "--out", str(tmp_path),
           "--stop-timeout", "10"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=child_env())
    assert done.returncode == 0, done.stdout[-3000:]
    run_dir = only_run_dir(tmp_path)
    info = json.loads((run_dir / "run.json").read_text())
    rows = read_csv(run_dir / "requests.csv", REQUEST_COLUMNS)
    served = sim.log()
    load = [r for r in served if len(r["request_id"]) == 16]  # the users' own ids
    probes = [r for r in served if len(r["request_id"]) != 16]  # sent without an id
    assert_each_served_once(rows, [r["request_id"] for r in load])
    setup = info["prompt_source"]["setup_requests"]
    # the pre-flight (one short request before the sweep) is a probe sent without an id too
    assert setup["preflight_requests"] == 1, setup
    assert setup["calibration_probes"] + setup["preflight_requests"] == len(probes), (setup, probes)
    assert setup["calibration_probes"] > 0
    assert setup.get("model_discovery", 0) >= max(workers, 1)
