"""The default ``loadknee run`` pins max_concurrency between grid levels (issue 12's table).

For simulator capacities that are not grid levels (``--max-num-seqs`` 6, 10, 12, 20, 28, 40),
real Locust drives the simulator over loopback with the default sweep (refinement and early stop
on), ``loadknee analyze`` reads the run directory, and the recommended ``max_concurrency`` must lie
within 15 % below the simulator's true saturation (``saturation_concurrency``) and never above it.
Stages are short (3 s) so the table fits a few minutes on 2 busy cores; three sweeps at a time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from loadknee_locust.sim.launch import SimProcess
from loadknee_locust.sim.params import preset
from loadknee_locust.sim.saturation import saturation_concurrency

pytestmark = pytest.mark.slow

SLOTS = (6, 10, 12, 20, 28, 40)
INPUT_TOKENS, OUTPUT_TOKENS = 128, 64  # loadknee run's defaults
SHORT = ["--stage-seconds", "3", "--warmup-seconds", "1", "--cooldown-seconds", "0.5",
         "--baseline-requests", "5"]  # fmt: skip


def sweep(slots: int, out: Path) -> tuple[dict[str, object], str]:
    """One default ``loadknee run`` against a sim with ``slots``; (knee.json, stages.csv)."""
    with SimProcess.start("fast", max_num_seqs=slots) as sim:
        run = subprocess.run(
            [sys.executable, "-m", "loadknee_locust", "run", "--host", sim.url, *SHORT,
             "--out", str(out), "--run-id", f"slots-{slots}"],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    run_dir = out / f"slots-{slots}"
    analyze = subprocess.run(
        [sys.executable, "-m", "loadknee_locust", "analyze", str(run_dir)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert analyze.returncode == 0, analyze.stderr[-3000:]
    knee = json.loads((run_dir / "report" / "knee.json").read_text())
    return knee, (run_dir / "stages.csv").read_text()


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("runs")
    with ThreadPoolExecutor(max_workers=3) as pool:
        return {slots: pool.submit(sweep, slots, out) for slots in SLOTS}


@pytest.mark.parametrize("slots", SLOTS)
def test_max_concurrency_within_15_pct_below_the_truth(sweeps, slots: int) -> None:
    knee, stages = sweeps[slots].result()
    truth = saturation_concurrency(preset("fast", max_num_seqs=slots), INPUT_TOKENS, OUTPUT_TOKENS)
    got = knee["knee"]["max_concurrency"]  # type: ignore[index]
    assert got is not None, stages
    assert 0.85 * truth <= got <= truth, f"truth {truth:g}, max_concurrency {got}\n{stages}"
    assert ",refine," in stages or slots in (1, 2, 4, 8, 16, 24, 32, 48, 64), stages
