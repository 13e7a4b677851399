"""Master + two worker processes (``--processes 2``): rows travel inside ``report_to_master`` and
only the master writes; every request the simulator served is recorded exactly once."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.support.run_support import (
    assert_matches_sim,
    check_run,
    http_post,
    locust_cmd,
    only_run_dir,
    read_run_dir,
    run,
    sweep_args,
    wait_requests_counted,
    wait_state,
    wait_workers,
    web_ui,
    worker_args,
)

pytestmark = pytest.mark.slow

WORKERS = 2  # worker processes beside the master (--processes): ids "0" and "1"


def test_master_and_two_workers_record_every_request_once(sim_server, tmp_path: Path) -> None:
    sim = sim_server(preset="fast")
    out = tmp_path / "runs"
    cmd = locust_cmd(
        "--headless", "--host", sim.url, *worker_args(WORKERS), "--stop-timeout", "30",
        *sweep_args(out, levels="2,4", stage_s=2.5, baseline=3),
    )  # fmt: skip
    text = run(cmd, timeout=120.0)
    rd = read_run_dir(only_run_dir(out))
    check_run(rd, levels=[2, 4], baseline=3)
    assert_matches_sim(rd, sim.log())
    assert {r["worker"] for r in rd.requests} == {"0", "1"}, text[-2000:]
    assert rd.info["mode"] == "master" and rd.info["worker_count"] == WORKERS
    assert rd.info["requests_recorded"] == len(rd.requests)
    # each worker's own CPU reading rides in its reports (not Locust's 10 s-old heartbeat value)
    client = list(csv.DictReader((only_run_dir(out) / "client.csv").open()))
    measured = {r["worker"] for r in client if r["worker"] in ("0", "1") and r["cpu_pct"]}
    assert measured == {"0", "1"}, client[:6]


def test_web_ui_stop_with_workers_keeps_the_late_rows(sim_server, tmp_path: Path) -> None:
    """After a web-UI Stop the master fires test_stop before the workers' last rows arrive (with
    their next periodic report): the run stays open for them until Locust quits."""
    sim = sim_server(preset="fast")
    out = tmp_path / "runs"
    args = ("--host", sim.url, *worker_args(WORKERS), "--stop-timeout", "10",
            *sweep_args(out, levels="4", stage_s=60.0, baseline=0))  # fmt: skip
    with web_ui(*args) as (base, _):
        wait_workers(base, WORKERS, 20.0)
        assert http_post(base + "/swarm", {"user_count": "1", "spawn_rate": "1"})["success"]
        wait_state(base, "running", 15.0)
        wait_requests_counted(base, 4, 30.0)  # a worker report with rows reached the master
        http_post(base + "/stop")
        wait_state(base, "stopped", 30.0)
        # the workers' next report (every 3 s) brings the last rows: wait for every served one
        wait_requests_counted(base, len(sim.log()), 30.0)
    rd = read_run_dir(only_run_dir(out))
    check_run(rd, levels=[4], baseline=0, stop_reason="stopped")
    assert_matches_sim(rd, sim.log())
