"""Open loop with real Locust against the simulator: arrival replay, rate stages, the rate knee.

* arrival replay (simulator without /metrics): each request goes out at its logged time divided
  by the time scale, within 5 ms median and 20 ms P99 while the cap does not bind; a burst past
  ``--llm-max-in-flight`` waits, and its rows say how long (``send_wait_ms``), never more than
  the cap in flight, latency counted from the planned send;
* Poisson rate stage (the example ``locustfiles/open_loop.py``, simulator without /metrics):
  the measured sends' inter-arrival CV is 1 ± 0.1, and the sends follow the seeded plan;
* rate sweep (simulator with /metrics): the rate knee lies at the first rate above the
  simulator's capacity, computed from its parameters (``sim/saturation.py``), and
  ``max_rate_rps`` below it;
* two workers: one schedule split, every request the server saw is one row, none twice, and
  the baseline still one user.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loadknee_locust.arrivals.plan import LEAD_S, OpenLoopPlan
from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.sim.launch import SimProcess
from loadknee_locust.sim.params import SimParams
from loadknee_locust.sim.saturation import expected_throughput
from tests.support.paths import REPO
from tests.support.run_support import (
    assert_matches_sim,
    child_env,
    locust_cmd,
    only_run_dir,
    read_run_dir,
    run,
)

pytestmark = pytest.mark.slow

OPENLOOP = str(REPO / "loadknee_locust" / "locustfiles" / "openloop.py")


EXAMPLE = str(REPO / "locustfiles" / "open_loop.py")


def _locust(
    sim: SimProcess, out: Path, *args: str, timeout: float = 60.0, locustfile: str = OPENLOOP
) -> Path:
    run(
        locust_cmd(
            "--headless", "--only-summary", "-H", sim.url, "--stop-timeout", "30",
            "--llm-out", str(out), "--llm-cooldown-seconds", "0.5",
            *args,
            locustfile=locustfile,
        ),
        timeout=timeout,
        env=child_env(),
    )  # fmt: skip
    return only_run_dir(out)


def _load(sim: SimProcess) -> list[dict[str, Any]]:
    """The simulator's records of the load: streamed (the calibration probes are not)."""
    return [rec for rec in sim.log() if rec["stream"]]


def _f(row: dict[str, str], key: str) -> float:
    return float(row[key])


def _max_overlap(rows: list[dict[str, str]]) -> int:
    events = sorted(
        [(_f(r, "start_unix_s"), 1) for r in rows] + [(_f(r, "end_unix_s"), -1) for r in rows],
        key=lambda e: (e[0], e[1]),
    )
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


@pytest.mark.quiet
def test_arrival_replay_on_time_and_waits_shown(tmp_path: Path) -> None:
    """Each request goes out at its planned time (5 ms median, 20 ms P99) and a burst past the cap
    waits, its rows saying how long. Sending on time needs a core the moment a send is due: with
    four test processes on two cores the P99 read 20.3 ms, a busy scheduler's delay, not the
    sender's, so the test is ``quiet`` (no other test runs beside it, ``tests/conftest.py``)."""
    scale, cap = 4.0, 3
    steady = [i * 1.2 for i in range(30)]  # 0.3 s apart once scaled: ~1 in flight
    burst_at = steady[-1] + 2.0
    times = steady + [burst_at] * 12  # 12 at once: 9 wait for the cap of 3
    log = tmp_path / "trace.jsonl"
    log.write_text(
        "".join(
            json.dumps({"timestamp": round(t * 1000), "input_length": 40, "output_length": 12})
            + "\n"
            for t in times
        )
    )
    with SimProcess.start("fast", metrics=False) as sim:
        rd = read_run_dir(
            _locust(
                sim,
                tmp_path / "runs",
                "--llm-arrival-log",
                str(log),
                "--llm-time-scale",
                str(scale),
                "--llm-max-in-flight",
                str(cap),
                "--llm-baseline-requests",
                "0",
                "--llm-warmup-seconds",
                "0",
            )
        )
        assert_matches_sim(rd, _load(sim))
    rows = sorted(rd.requests, key=lambda r: _f(r, "intended_unix_s"))
    # without calibration the input length is an estimate: served, flagged length_mismatch
    assert len(rows) == len(times)
    assert all(r["outcome"] in ("ok", "length_mismatch") for r in rows)
    anchor = _f(rd.stages[0], "start_unix_s") + LEAD_S
    planned = [anchor + t / scale for t in sorted(times)]
    intended = [_f(r, "intended_unix_s") for r in rows]
    assert [t - intended[0] for t in intended] == pytest.approx(
        [t - planned[0] for t in planned], abs=1e-6
    )  # the logged gaps divided by the time scale, exactly
    assert intended[0] == pytest.approx(planned[0], abs=1e-3)  # from the stage's start
    late_ms = np.array([(_f(r, "start_unix_s") - _f(r, "intended_unix_s")) * 1000 for r in rows])
    assert [_f(r, "send_wait_ms") for r in rows] == pytest.approx(late_ms.tolist(), abs=1e-3)
    on_time = np.abs(late_ms[: len(steady)])  # below the cap: sent when planned
    assert np.median(on_time) <= 5.0 and np.percentile(on_time, 99) <= 20.0, on_time
    waits = late_ms[len(steady) :]
    assert (waits > 50.0).sum() >= 12 - cap - 1, waits  # the cap bound: the waits are written
    assert _max_overlap(rows[len(steady) :]) <= cap
    for r in rows:
        assert _f(r, "e2e_intended_ms") == pytest.approx(
            _f(r, "send_wait_ms") + _f(r, "e2e_ms"), abs=1e-3
        )
    # the logged lengths went out: 12 output tokens each (the simulator counts exactly)
    assert {r["completion_tokens"] for r in rows} == {"12"}


def _cv(starts: list[float]) -> float:
    gaps = np.diff(sorted(starts))
    return float(gaps.std() / gaps.mean())


@pytest.mark.quiet  # the measured sends' CV: a timing check (at load 7.5 it read 1.10)
def test_poisson_stage_measured_sends(tmp_path: Path) -> None:
    """Through the example locustfile (locustfiles/open_loop.py), simulator without /metrics."""
    rate, seconds = 40.0, 8.0
    with SimProcess.start("fast", max_num_seqs=64, metrics=False) as sim:
        rd = read_run_dir(
            _locust(
                sim,
                tmp_path / "runs",
                "--llm-rates",
                f"{rate:g}",
                "--llm-arrivals",
                "poisson",
                "--llm-seed",
                "3",
                "--llm-stage-seconds",
                f"{seconds:g}",
                "--llm-warmup-seconds",
                "1",
                "--llm-baseline-requests",
                "0",
                "--llm-input-tokens",
                "32",
                "--llm-output-tokens",
                "8",
                locustfile=EXAMPLE,
            )
        )
        assert_matches_sim(rd, _load(sim))
    assert [s["kind"] for s in rd.stages] == ["step"]
    starts = [_f(r, "start_unix_s") for r in rd.requests]
    # the send-time criterion (5 ms median, 20 ms P99) is the replay test's, at a low rate: at
    # 40/s on a busy shared 2-core machine the P99 lateness measured 14 ms once and 25 ms once
    # (the process descheduled), so here only the seeded plan and the measured CV are judged
    assert abs(_cv(starts) - 1.0) <= 0.1
    plan = OpenLoopPlan.from_options(
        LlmOptions(rates=f"{rate:g}", arrivals="poisson", seed=3, stage_seconds=f"{seconds:g}")
    )
    anchor = _f(rd.stages[0], "start_unix_s")
    offsets = [a.offset_s for a in plan.stage_arrivals(0, seconds)]
    assert sorted(_f(r, "intended_unix_s") - anchor for r in rd.requests) == pytest.approx(
        offsets, abs=1e-6
    )


def test_rate_knee_at_the_simulators_capacity(tmp_path: Path) -> None:
    """Rates around the simulator's capacity (4 slots, 64 in / 32 out: about 10.3 requests/s):
    the first stage above it is the knee, the one below is held."""
    params = dataclasses.replace(SimParams(), max_num_seqs=4)
    capacity = expected_throughput(params, params.max_num_seqs + 1, 64, 32) / 32
    rates = (0.4 * capacity, 0.8 * capacity, 1.35 * capacity)
    with SimProcess.start("fast", max_num_seqs=4) as sim:
        run_dir = _locust(
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
            _locust(
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
        assert_matches_sim(rd, _load(sim))
    baseline = [r for r in rd.requests if r["stage"] == "0"]
    steps = [r for r in rd.requests if r["stage"] == "1"]
    assert len({r["worker"] for r in baseline}) == 1  # the baseline stays one user
    assert not any(r["intended_unix_s"] for r in baseline)  # closed loop, sequential
    assert {r["worker"] for r in steps} == {"0", "1"}
    plan = OpenLoopPlan.from_options(
        LlmOptions(rates=f"{rate:g}", arrivals="constant", stage_seconds=f"{seconds:g}")
    )
    planned = [a.offset_s for a in plan.stage_arrivals(0, seconds)]
    anchor = _f(rd.stages[1], "start_unix_s")
    got = sorted(_f(r, "intended_unix_s") - anchor for r in steps)
    assert got == pytest.approx(planned, abs=1e-3)  # each planned send once, across workers
