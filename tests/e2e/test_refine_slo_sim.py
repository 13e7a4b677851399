"""``loadknee run --slo`` pins the SLO boundary between grid levels, and ``analyze`` reports it.

Real Locust drives the simulator (``fast``: 8 slots, so no knee up to 8 users) over the grid
1, 8 with an e2e P95 target between the two levels' (the simulator's e2e grows with the number of
sequences it decodes at once: ~0.68 s alone, ~0.95 s at 8 with 64 output tokens). The 1-user
stage meets the target and the 8-user stage breaks it, so the sweep must bisect between them
with ``refine`` stages until the SLO capacity and the first breaking level are adjacent — with no
knee in the run, only the SLO bracket can have asked for them. ``loadknee analyze`` without any
``--slo`` then reads the targets from ``run.json`` and reports that capacity, refine levels
included, equal to the documented rule applied by hand to the per-stage P95s.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadknee_core.numeric import counted
from loadknee_locust.sim.launch import SimProcess

pytestmark = pytest.mark.slow

SLO = "e2e_p95_ms=850"
SWEEP = ["--levels", "1,8", "--stage-seconds", "3", "--warmup-seconds", "1",
         "--cooldown-seconds", "0.5", "--baseline-requests", "5",
         "--output-tokens", "64",
         # tests the SLO's refinement, not loadknee predict: skip the probe's ~2 s
         "--no-concurrency-probe"]  # fmt: skip


def test_the_sweep_refines_between_the_slo_capacity_and_the_first_break(tmp_path: Path) -> None:
    with SimProcess.start("fast") as sim:
        run = subprocess.run(
            [sys.executable, "-m", "loadknee_locust", "run", "--no-analyze",
             "--host", sim.url, *SWEEP,
             "--slo", SLO, "--out", str(tmp_path), "--run-id", "slo"],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    run_dir = tmp_path / "slo"
    assert json.loads((run_dir / "run.json").read_text())["parameters"]["llm_slo"] == SLO
    stages = list(csv.DictReader((run_dir / "stages.csv").open()))
    refined = sorted(int(s["target_users"]) for s in stages if s["kind"] == "refine")
    assert refined and all(1 < u < 8 for u in refined), stages  # only the SLO bracket asks

    analyze = subprocess.run(
        [sys.executable, "-m", "loadknee_locust", "analyze", str(run_dir), "--quiet"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert analyze.returncode == 0, analyze.stderr[-3000:]
    knee = json.loads((run_dir / "report" / "knee.json").read_text())
    slo = knee["slo"]
    assert slo["limits"] == "e2e P95 ≤ 850 ms", slo  # read back from run.json
    p95 = {row["target_users"]: row["e2e_p95_ms"] for row in knee["summary"]
           if row["kind"] in ("step", "refine")}  # fmt: skip
    assert sorted(p95) == sorted({1, 8, *refined})  # every refine level judged against the SLO
    passing = [u for u in sorted(p95) if p95[u] <= 850]
    first_break = min(u for u in p95 if u not in passing)
    capacity = max(u for u in passing if u < first_break)
    assert slo["capacity"] == capacity, (slo["summary"], p95)
    said = run.stdout[-3000:] + run.stderr[-3000:]
    assert first_break - capacity == 1, (p95, refined, said)  # bisected until adjacent
    # the screen's SLO capacity: its users, its limits and what binds, as knee.json has them
    shown = f"{counted(capacity, 'user')} ({slo['limits']}), {slo['binding']}-bound"
    assert "".join(shown.split()) in "".join(analyze.stdout.split()), analyze.stdout
