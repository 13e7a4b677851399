"""Open loop with real Locust against the simulator: rate stages, the rate knee, two workers.

* rate sweep (simulator with /metrics): the rate knee lies at the first rate above the
  simulator's capacity, computed from its parameters (``sim/saturation.py``), and
  ``max_rate_rps`` below it;
* two workers: one schedule split, every request the server saw is one row, none twice, and
  the baseline still one user.

The send-time checks (arrival replay on time, the Poisson stage's measured CV) run alone, in
tests/e2e/test_openloop_timing_sim.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from loadknee_locust.arrivals.plan import OpenLoopPlan
from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.sim.launch import SimProcess
from loadknee_locust.sim.params import SimParams
from loadknee_locust.sim.saturation import expected_throughput
from tests.support.openloop_runs import load_records, num, openloop_locust
from tests.support.run_support import assert_matches_sim, read_run_dir

pytestmark = pytest.mark.slow


def test_rate_knee_at_the_simulators_capacity(tmp_path: Path) -> None:
    """Rates around the simulator's capacity (4 slots, 64 in / 32 out: about 10.3 requests/s):
    the first stage above it is the knee, the one below is held."""
    params = dataclasses.replace(SimParams(), max_num_seqs=4)
    capacity = expected_throughput(params, params.max_num_seqs + 1, 64, 32) / 32
    rates = (0.4 * capacity, 0.8 * capacity, 1.35 * capacity)
    with SimProcess.start("fast", max_num_seqs=4) as sim:
        run_dir = openloop_locust(
            sim, tmp_path / "runs",
            "--llm-rates", ",".join(f"{r:.3f}" for r in rates), "--llm-arrivals", "gamma",
            "--llm-burstiness", "4", "--llm-stage-seconds", "6", "--llm-warmup-seconds", "1",
            "--llm-baseline-requests", "3", "--llm-input-tokens", "64",
            "--llm-output-tokens", "32",
        )  # fmt: skip
    from analysis.pipeline import analyze_run

    analysis = analyze_run(run_dir)
    knee = analysis.rate_knee
    assert knee is not None and analysis.rate_stages is not None
    table: Any = analysis.rate_stages
    assert knee.knee_rate_rps == pytest.approx(rates[2], rel=1e-3), (knee, table.to_string())
    assert knee.max_rate_rps == pytest.approx(rates[1], rel=1e-3)
    assert knee.max_rate_rps < capacity < knee.knee_rate_rps
    held = table[table["rate_rps"] < capacity]
    assert (held["served_pct"] > 90).all(), table.to_string()
    from analysis.report.screen import rate_answer_lines
    from loadknee_core.numeric import fmt_magnitude

    deploy = rate_answer_lines(knee)[0]  # the screen leads with the rate, not "1 user"
    assert f"{fmt_magnitude(knee.max_rate_rps)} requests/s" in deploy and "concurrent" not in deploy


def test_two_workers_split_one_schedule(tmp_path: Path) -> None:
    rate, seconds = 20.0, 5.0
    with SimProcess.start("fast", max_num_seqs=32) as sim:
        rd = read_run_dir(
            openloop_locust(
                sim,
                tmp_path / "runs",
                "--processes",
                "2",
                "--llm-rates",
                f"{rate:g}",
                "--llm-arrivals",
                "constant",
                "--llm-stage-seconds",
                f"{seconds:g}",
                "--llm-warmup-seconds",
                "1",
                "--llm-baseline-requests",
                "3",
                "--llm-input-tokens",
                "32",
                "--llm-output-tokens",
                "8",
            )
        )
        assert_matches_sim(rd, load_records(sim))
    baseline = [r for r in rd.requests if r["stage"] == "0"]
    steps = [r for r in rd.requests if r["stage"] == "1"]
    assert len({r["worker"] for r in baseline}) == 1  # the baseline stays one user
    assert not any(r["intended_unix_s"] for r in baseline)  # closed loop, sequential
    assert {r["worker"] for r in steps} == {"0", "1"}
    plan = OpenLoopPlan.from_options(
        LlmOptions(rates=f"{rate:g}", arrivals="constant", stage_seconds=f"{seconds:g}")
    )
    planned = [a.offset_s for a in plan.stage_arrivals(0, seconds)]
    anchor = num(rd.stages[1], "start_unix_s")
    got = sorted(num(r, "intended_unix_s") - anchor for r in steps)
    assert got == pytest.approx(planned, abs=1e-3)  # each planned send once, across workers
