"""Headroom against a real simulator run: the capacity ``loadknee trace --against`` reads is the
one the sim's parameters imply (its saturation concurrency), with and without its /metrics.

The run is the recorded ``slots4-drive`` sweep (tests/support/recorded_runs.py), the one
tests/e2e/test_knee_sim.py judges as its ``slots-4`` case: only a real run shows that the
capacity read back is the simulator's; recording it once serves both files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.pipeline import analyze_run
from analysis.traffic import cli
from analysis.traffic.headroom import SCALES, run_capacity
from loadknee_core import contract
from loadknee_locust.sim.params import preset
from loadknee_locust.sim.saturation import predicted_knee_level, saturation_concurrency
from tests.support.late_client import late_cannot_tell
from tests.support.recorded_runs import SLOTS4_LEVELS as LEVELS
from tests.support.recorded_runs import SLOTS4_SPEC

pytestmark = pytest.mark.slow

SLOTS = 4


@pytest.fixture(scope="module")
def sim_run(recorded_run) -> Path:
    return Path(recorded_run("slots4-drive").path)


def _truth() -> int:
    spec = SLOTS4_SPEC
    params = preset("fast", max_num_seqs=SLOTS)
    c_star = saturation_concurrency(params, spec.input_tokens, spec.output_tokens)
    knee = predicted_knee_level(params, LEVELS, spec.input_tokens, spec.output_tokens)
    assert knee is not None
    before = max(level for level in LEVELS if level < knee)
    assert before == c_star  # the levels put c* on a tested level
    return before


@pytest.mark.parametrize("metrics", [True, False], ids=["with-metrics", "without-metrics"])
def test_headroom_uses_the_capacity_the_sim_implies(
    sim_run: Path, tmp_path: Path, metrics: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = sim_run
    if not metrics:
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        for name in (contract.RUN_JSON, contract.STAGES_CSV, contract.REQUESTS_CSV):
            (run_dir / name).write_bytes((sim_run / name).read_bytes())
    allowed = _truth()
    analysis = analyze_run(run_dir)
    if late_cannot_tell(analysis):  # a busy suite's noise, said with its evidence: no capacity
        return
    assert run_capacity(analysis).users == allowed
    t0 = 1_767_603_600.0  # 1 request a second lasting 1.5 s (P95 2), one more at 30 s: peak 3
    rows = [{"timestamp": t0 + i, "duration_s": 1.5, "input_tokens": 64} for i in range(60)]
    rows.append({"timestamp": t0 + 30, "duration_s": 1.0, "input_tokens": 64})
    log = tmp_path / "prod.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    assert cli.main([str(log), "--against", str(run_dir), "--out", str(out), "--no-plot"]) == 0
    doc = json.loads((out / "prod.jsonl.trace.json").read_text())
    room = doc["headroom"]
    assert (doc["capacity"]["kind"], doc["capacity"]["users"]) == ("knee", allowed)
    assert (room["peak"], room["allowed"]) == (3, allowed)
    assert room["ratio"] == pytest.approx(allowed / 3)
    # the first growth step whose peak passes the capacity: 3 × s > 4 first at s = 1.5
    assert room["breaking_scale"] == min(s for s in SCALES if 3 * s > allowed)
    assert room["breaks_at_s"] == pytest.approx(t0 + 30)
    assert room["text"] in capsys.readouterr().out  # the screen shows trace.json's headroom
