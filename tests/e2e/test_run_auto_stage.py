"""``--stage-seconds auto`` end to end: real Locust against the simulator over loopback; each
level holds until its throughput interval is precise (or its maximum), and the analysis, which
computes the interval the same way after the run, agrees that the stage can be trusted.

Only a real run shows when the live shape ended each stage: the sweep is the recorded
``auto-local`` run (tests/support/recorded_runs.py; tests/e2e/test_accounting.py reconciles the
server's count on it).
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.recorded_runs import AUTO_MAX_S as MAX_S
from tests.support.recorded_runs import AUTO_MIN_S as MIN_S

pytestmark = pytest.mark.slow

TICK_S = 1.5  # the shape decides once a second; a late tick on a busy machine adds a little


def test_auto_stages_hold_until_precise_between_their_bounds(recorded_run, tmp_path: Path) -> None:
    run_dir = shutil.copytree(recorded_run("auto-local").path, tmp_path / "auto")  # analyze writes
    with (run_dir / "stages.csv").open() as f:
        steps = [r for r in csv.DictReader(f) if r["kind"] == "step"]
    assert [int(r["target_users"]) for r in steps] == [2, 8]
    for r in steps:
        held = float(r["measure_end_unix_s"]) - float(r["warmup_end_unix_s"])
        assert r["stop_reason"] in ("precise", "imprecise"), r
        assert MIN_S <= held <= MAX_S + TICK_S, r
        if r["stop_reason"] == "imprecise":
            assert held >= MAX_S, r
    info = json.loads((run_dir / "run.json").read_text())
    assert info["parameters"]["llm_stage_seconds"] == "auto"
    analyze = subprocess.run(
        [sys.executable, "-m", "loadknee_locust", "analyze", str(run_dir)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert analyze.returncode == 0, analyze.stderr[-3000:]
    with (run_dir / "report" / "record.csv").open() as f:
        record = {r["stage"]: r for r in csv.DictReader(f)}
    for r in steps:
        if r["stop_reason"] == "precise":
            # the live check cut its window one request span short; the analysis sees all of it
            hw = float(record[r["stage"]]["output_tok_s_hw_pct"])
            assert hw <= 10.0, (r, hw)  # the analysis's own "trusted" limit (max_interval_pct)
