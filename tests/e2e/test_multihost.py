"""Locust master and workers as separate processes on separate addresses, one worker's clock off.

The simulator listens on 127.0.0.2 and the master on 127.0.0.3 (Linux routes all of 127/8 to
loopback), the workers are their own processes, and one worker's wall clock reads 2 s ahead
(``tests/support/skewed_clock_locustfile.py``, a test-only hook): on separate hosts the rows it
stamps
would land in the wrong stage near every boundary unless the master corrects them. Checked against
the simulator's own log, whose clock is the master's here: no request lost or doubled, every row's
start within a fraction of a second of the moment the server saw it, and in the stage and phase
that moment belongs to. Also here: 1 master + 4 workers at 256 concurrent users.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.run_support import (
    HERE,
    RunDir,
    assert_matches_sim,
    check_run,
    child_env,
    expected_label,
    free_port,
    only_run_dir,
    read_run_dir,
    sweep_args,
)

pytestmark = pytest.mark.slow

SKEWED = str(HERE / "skewed_clock_locustfile.py")
SKEW_S = 2.0
#: the start stamp may precede the server's arrival stamp by the request's trip and the client's
#: hub delay; a 2 s skew left uncorrected is far outside it
TRIP_S = 0.4
MASTER_HOST = "127.0.0.3"
SIM_HOST = "127.0.0.2"


def _locust(*args: str) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", SKEWED, *args]


def run_distributed(
    sim_url: str,
    out: Path,
    *,
    worker_skews: list[float],
    sweep: list[str],
    timeout: float,
    tmp: Path,
) -> str:
    """Master + one worker process per skew; return the master's output (fails on any exit != 0)."""
    port = str(free_port())
    master_cmd = _locust(
        "--master", "--headless", "--master-bind-host", MASTER_HOST, "--master-bind-port", port,
        "--expect-workers", str(len(worker_skews)), "--host", sim_url, "--stop-timeout", "30",
        *sweep,
    )  # fmt: skip
    worker_cmd = _locust("--worker", "--master-host", MASTER_HOST, "--master-port", port)
    logs: list[Any] = []
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i, cmd in enumerate([master_cmd] + [worker_cmd] * len(worker_skews)):
            env = child_env(**({"LK_TEST_CLOCK_SKEW_S": str(worker_skews[i - 1])} if i else {}))
            log = (tmp / f"proc{i}.log").open("wb")
            logs.append(log)
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env))
        codes = [p.wait(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for log in logs:
            log.close()
    texts = [(tmp / f"proc{i}.log").read_text(errors="replace") for i in range(len(procs))]
    assert codes == [0] * len(procs), "\n----\n".join(t[-2500:] for t in texts)
    return texts[0]


def assert_rows_at_server_time(rd: RunDir, sim_log: list[dict[str, Any]]) -> None:
    """Each row's start is on the server's (here: the master's) clock, and its stage and phase
    are those of the moment the server saw it, except within the trip time of a boundary."""
    arrival = {str(r["request_id"]): float(r["arrival_unix_s"]) for r in sim_log}
    boundaries = [float(s[k]) for s in rd.stages for k in ("start_unix_s", "warmup_end_unix_s")]
    boundaries += [float(s["measure_end_unix_s"]) for s in rd.stages]
    off = []
    for row in rd.requests:
        start, seen = float(row["start_unix_s"]), arrival[row["request_id"]]
        if not -0.05 <= seen - start <= TRIP_S:
            off.append((row["worker"], round(seen - start, 3)))
            continue
        near = any(abs(seen - b) <= TRIP_S for b in boundaries)
        if not near:
            assert (int(row["stage"]), row["phase"]) == expected_label(rd.stages, seen), row
    assert not off, f"{len(off)} rows off the server's clock, e.g. {off[:5]}"


def peak_in_flight(sim_log: list[dict[str, Any]]) -> int:
    """Most requests the server had between arrival and last byte at one moment."""
    edges = sorted(
        [(float(r["arrival_unix_s"]), 1) for r in sim_log]
        + [(float(r["end_unix_s"]), -1) for r in sim_log]
    )  # at equal times the end (-1) sorts first
    peak = level = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    return peak


def test_workers_on_other_addresses_with_a_skewed_clock(sim_server, tmp_path: Path) -> None:
    sim = sim_server(preset="fast", host=SIM_HOST)
    assert sim.url.startswith(f"http://{SIM_HOST}:")
    out = tmp_path / "runs"
    run_distributed(
        sim.url, out, worker_skews=[0.0, SKEW_S],
        sweep=sweep_args(out, levels="2,4", stage_s=3.0, baseline=3), timeout=150.0,
        tmp=tmp_path,
    )  # fmt: skip
    rd = read_run_dir(only_run_dir(out))
    check_run(rd, levels=[2, 4], baseline=3)
    assert_matches_sim(rd, sim.log())
    assert rd.info["mode"] == "master" and rd.info["worker_count"] == 2
    assert {r["worker"] for r in rd.requests} == {"0", "1"}
    clocks = rd.info["worker_clocks"]
    assert set(clocks) == {"0", "1"}, clocks
    offsets = sorted(c["offset_s"] for c in clocks.values())
    assert offsets == pytest.approx([0.0, SKEW_S], abs=0.1)
    assert all(c["bound_s"] is not None and c["stage_messages"] > 0 for c in clocks.values())
    assert_rows_at_server_time(rd, sim.log())


def test_four_workers_at_256_users_record_every_request_once(sim_server, tmp_path: Path) -> None:
    """256 concurrent streams over 4 worker processes: the point is the row accounting, so the
    simulator has a slot for every user and short steps."""
    sim = sim_server(preset="fast", max_num_seqs=256, decode_base_ms=5.0, decode_per_seq_ms=0.02)
    out = tmp_path / "runs"
    run_distributed(
        sim.url, out, worker_skews=[0.0] * 4,
        sweep=[*sweep_args(out, levels="64,256", stage_s=4.0, baseline=0), "--llm-no-refine"],
        timeout=170.0,  # the accounting is the point: the plain grid, no refine stages
        tmp=tmp_path,
    )  # fmt: skip
    rd = read_run_dir(only_run_dir(out))
    check_run(rd, levels=[64, 256], baseline=0)
    log = sim.log()
    assert_matches_sim(rd, log)
    assert {r["worker"] for r in rd.requests} == {"0", "1", "2", "3"}
    assert rd.info["worker_count"] == 4 and rd.info["requests_recorded"] == len(rd.requests)
    assert Counter(r["outcome"] for r in log) == {"ok": len(log)}
    # the top step really drove 256 streams at once (in flight at the server, by its own log)
    assert peak_in_flight(log) == 256
