"""Master + two worker processes (``--processes 2``): rows travel inside ``report_to_master`` and
only the master writes; every request the simulator served is recorded exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.run_support import (
    assert_matches_sim,
    check_run,
    free_port,
    locust_cmd,
    only_run_dir,
    read_run_dir,
    run,
    sweep_args,
)

pytestmark = pytest.mark.slow


def test_master_and_two_workers_record_every_request_once(sim_server, tmp_path: Path) -> None:
    sim = sim_server(preset="fast")
    out = tmp_path / "runs"
    port = str(free_port())
    cmd = locust_cmd(
        "--headless", "--host", sim.url, "--processes", "2",
        "--master-bind-host", "127.0.0.1", "--master-bind-port", port, "--master-port", port,
        "--stop-timeout", "30",
        *sweep_args(out, levels="2,4", stage_s=2.5, baseline=3),
    )  # fmt: skip
    text = run(cmd, timeout=120.0)
    rd = read_run_dir(only_run_dir(out))
    check_run(rd, levels=[2, 4], baseline=3)
    assert_matches_sim(rd, sim.log())
    assert {r["worker"] for r in rd.requests} == {"0", "1"}, text[-2000:]
    assert rd.info["mode"] == "master" and rd.info["worker_count"] == 2
    assert rd.info["requests_recorded"] == len(rd.requests)
