"""A prefix-cache sweep with ``--workers 2`` (master + two Locust worker processes).

The kv-bound simulator of tests/e2e/test_prefix_cache_kv_sim.py with the cache on (1,024 of 1,280
prompt tokens a shared system prompt; 16 sequences fit once the prefix is held once), three
levels. Both workers' rows reach the master's run directory; checked against the simulator's own
log: every stage's hit rate (the counters' increase over the window) within 1 point of the log's
cached over prompt tokens, the rows of both workers, and the knee and max_concurrency where the
simulator's parameters put them (24 and 16).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from analysis.pipeline import analyze_run
from loadknee_locust.sim.launch import SimProcess
from loadknee_locust.sim.params import preset
from loadknee_locust.sim.saturation import kv_limit, predicted_knee_level
from tests.support.prefix_truth import INPUT, OUTPUT, PREFIX, SIM, prefix_sweep, sim_hit_pct

pytestmark = pytest.mark.slow

LEVELS = (8, 16, 24)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, list[dict]]:
    out = tmp_path_factory.mktemp("prefix-workers")
    with SimProcess.start("kv-bound", enable_prefix_caching=True, **SIM) as sim:
        run_dir = prefix_sweep(sim.url, out, "w2", LEVELS, "--workers", "2")
        log = sim.log()
    return run_dir, log


def test_two_workers_hit_rate_and_knee(run) -> None:
    run_dir, log = run
    rows = pd.read_csv(run_dir / "requests.csv")
    measured = rows[rows["phase"] == "measure"]
    assert measured["worker"].nunique() == 2  # both workers' rows reached the master
    analysis = analyze_run(run_dir)
    summary = analysis.summary.set_index("stage")
    truth = sim_hit_pct(run_dir, log)
    assert len(truth) == len(LEVELS) + 1
    for stage, expected in truth.items():
        assert summary.at[stage, "prefix_cache_hit_pct"] == pytest.approx(expected, abs=1.0)
    params = preset("kv-bound", enable_prefix_caching=True, **SIM)
    knee = analysis.knee
    assert knee.knee_users == predicted_knee_level(
        params, LEVELS, INPUT, OUTPUT, cached_tokens=PREFIX
    ), knee.summary
    assert knee.max_concurrency == kv_limit(params, INPUT, OUTPUT, cached_tokens=PREFIX) == 16
