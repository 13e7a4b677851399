"""Open-loop send times with real Locust against the simulator (no /metrics): each a timing
check, so each test is ``quiet`` (no other test runs beside it, ``tests/conftest.py``), and this
file holds only them: files with a quiet test run last, when the tests beside them are short.

* arrival replay: each request goes out at its logged time divided by the time scale, within
  5 ms median and 20 ms P99 while the cap does not bind; a burst past ``--llm-max-in-flight``
  waits, and its rows say how long (``send_wait_ms``), never more than the cap in flight,
  latency counted from the planned send;
* Poisson rate stage (the example ``locustfiles/open_loop.py``): the measured sends'
  inter-arrival CV is 1 ± 0.1, and the sends follow the seeded plan.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from loadknee_locust.arrivals.plan import LEAD_S, OpenLoopPlan
from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.sim.launch import SimProcess
from tests.support.openloop_runs import EXAMPLE, load_records, num, openloop_locust
from tests.support.run_support import assert_matches_sim, read_run_dir

pytestmark = pytest.mark.slow


def _max_overlap(rows: list[dict[str, str]]) -> int:
    events = sorted(
        [(num(r, "start_unix_s"), 1) for r in rows] + [(num(r, "end_unix_s"), -1) for r in rows],
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
            openloop_locust(
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
        assert_matches_sim(rd, load_records(sim))
    rows = sorted(rd.requests, key=lambda r: num(r, "intended_unix_s"))
    # without calibration the input length is an estimate: served, flagged length_mismatch
    assert len(rows) == len(times)
    assert all(r["outcome"] in ("ok", "length_mismatch") for r in rows)
    anchor = num(rd.stages[0], "start_unix_s") + LEAD_S
    planned = [anchor + t / scale for t in sorted(times)]
    intended = [num(r, "intended_unix_s") for r in rows]
    assert [t - intended[0] for t in intended] == pytest.approx(
        [t - planned[0] for t in planned], abs=1e-6
    )  # the logged gaps divided by the time scale, exactly
    assert intended[0] == pytest.approx(planned[0], abs=1e-3)  # from the stage's start
    late_ms = np.array([(num(r, "start_unix_s") - num(r, "intended_unix_s")) * 1000 for r in rows])
    assert [num(r, "send_wait_ms") for r in rows] == pytest.approx(late_ms.tolist(), abs=1e-3)
    on_time = np.abs(late_ms[: len(steady)])  # below the cap: sent when planned
    assert np.median(on_time) <= 5.0 and np.percentile(on_time, 99) <= 20.0, on_time
    waits = late_ms[len(steady) :]
    assert (waits > 50.0).sum() >= 12 - cap - 1, waits  # the cap bound: the waits are written
    assert _max_overlap(rows[len(steady) :]) <= cap
    for r in rows:
        assert num(r, "e2e_intended_ms") == pytest.approx(
            num(r, "send_wait_ms") + num(r, "e2e_ms"), abs=1e-3
        )
    # the logged lengths went out: 12 output tokens each (the simulator counts exactly)
    assert {r["completion_tokens"] for r in rows} == {"12"}


def _cv(starts: list[float]) -> float:
    gaps = np.diff(sorted(starts))
    return float(gaps.std() / gaps.mean())


@pytest.mark.quiet  # the measured sends' CV: a timing check (at load 7.5 it read 1.10)
def test_poisson_stage_measured_sends(tmp_path: Path) -> None:
    """Through the example locustfile (locustfiles/open_loop.py), simulator without /metrics."""
    rate, seconds = 64.0, 5.0  # 316 planned sends (their CV 1.012), as 40/s for 8 s gave
    with SimProcess.start("fast", max_num_seqs=64, metrics=False) as sim:
        rd = read_run_dir(
            openloop_locust(
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
        assert_matches_sim(rd, load_records(sim))
    assert [s["kind"] for s in rd.stages] == ["step"]
    starts = [num(r, "start_unix_s") for r in rd.requests]
    # the send-time criterion (5 ms median, 20 ms P99) is the replay test's, at a low rate: at
    # 40/s on a busy shared 2-core machine the P99 lateness measured 14 ms once and 25 ms once
    # (the process descheduled), so here only the seeded plan and the measured CV are judged
    assert abs(_cv(starts) - 1.0) <= 0.1
    plan = OpenLoopPlan.from_options(
        LlmOptions(rates=f"{rate:g}", arrivals="poisson", seed=3, stage_seconds=f"{seconds:g}")
    )
    anchor = num(rd.stages[0], "start_unix_s")
    offsets = [a.offset_s for a in plan.stage_arrivals(0, seconds)]
    assert sorted(num(r, "intended_unix_s") - anchor for r in rd.requests) == pytest.approx(
        offsets, abs=1e-6
    )
