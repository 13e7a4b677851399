"""Master + two worker processes (``--processes 2``): rows travel inside ``report_to_master`` and
only the master writes; every request the simulator served is recorded exactly once."""

from __future__ import annotations

import csv
import json
import subprocess
import time
from pathlib import Path

import pytest

from loadknee_locust.children import stop_child
from tests.support.run_support import (
    assert_matches_sim,
    check_run,
    child_env,
    free_port,
    http_get,
    http_post,
    locust_cmd,
    only_run_dir,
    read_run_dir,
    run,
    sweep_args,
    wait_for_web_ui,
    wait_requests_counted,
    wait_state,
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
    # each worker's own CPU reading rides in its reports (not Locust's 10 s-old heartbeat value)
    client = list(csv.DictReader((only_run_dir(out) / "client.csv").open()))
    measured = {r["worker"] for r in client if r["worker"] in ("0", "1") and r["cpu_pct"]}
    assert measured == {"0", "1"}, client[:6]


def test_web_ui_stop_with_workers_keeps_the_late_rows(sim_server, tmp_path: Path) -> None:
    """After a web-UI Stop the master fires test_stop before the workers' last rows arrive (with
    their next periodic report): the run stays open for them until Locust quits."""
    sim = sim_server(preset="fast")
    out = tmp_path / "runs"
    port, web = str(free_port()), free_port()
    base = f"http://127.0.0.1:{web}"
    cmd = locust_cmd(
        "--web-host", "127.0.0.1", "--web-port", str(web), "--host", sim.url,
        "--processes", "2", "--master-bind-host", "127.0.0.1", "--master-bind-port", port,
        "--master-port", port, "--stop-timeout", "10",
        *sweep_args(out, levels="4", stage_s=60.0, baseline=0),
    )  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env()
    )
    try:
        wait_for_web_ui(base)
        deadline = time.monotonic() + 20.0
        while json.loads(http_get(base + "/stats/requests")).get("worker_count", 0) < 2:
            assert time.monotonic() < deadline, "workers did not connect"
            time.sleep(0.3)
        assert http_post(base + "/swarm", {"user_count": "1", "spawn_rate": "1"})["success"]
        wait_state(base, "running", 15.0)
        wait_requests_counted(base, 4, 30.0)  # a worker report with rows reached the master
        http_post(base + "/stop")
        wait_state(base, "stopped", 30.0)
        # the workers' next report (every 3 s) brings the last rows: wait for every served one
        wait_requests_counted(base, len(sim.log()), 30.0)
    finally:
        stop_child(proc, 30.0)
    rd = read_run_dir(only_run_dir(out))
    check_run(rd, levels=[4], baseline=0, stop_reason="stopped")
    assert_matches_sim(rd, sim.log())
