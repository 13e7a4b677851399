"""Web UI mode driven over HTTP: POST /swarm (custom --llm-* fields from the form), the live Knee
tab in /stats/requests, its CSV download, a web-UI Stop, and two runs in one Locust process."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from loadknee_locust.webui.tab import COLUMNS
from tests.support.run_support import (
    assert_matches_sim,
    check_run,
    http_get,
    http_post,
    read_run_dir,
    sweep_args,
    wait_requests_counted,
    wait_state,
    web_ui,
)

pytestmark = pytest.mark.slow


def test_web_ui_two_runs_knee_tab_and_stop(sim_server, tmp_path: Path) -> None:
    """One Locust process, two runs: a short sweep set in the form runs to its end (its Knee tab
    rows and CSV checked), then the command line's long sweep is stopped from the UI; together
    the two run dirs hold every request the simulator served."""
    sim = sim_server(preset="fast")
    out = tmp_path / "runs"
    args = ("--host", sim.url, "--stop-timeout", "10",
            *sweep_args(out, levels="4", stage_s=30.0, baseline=0))  # fmt: skip
    with web_ui(*args) as (base, page):
        assert "llm_levels" in page  # the plugin's options are custom parameters in the form
        # run 1: a complete short sweep, configured from the form
        form = {"user_count": "1", "spawn_rate": "1", "host": sim.url, "llm_levels": "1,2",
                "llm_stage_seconds": "1.5", "llm_baseline_requests": "2"}  # fmt: skip
        assert http_post(base + "/swarm", form)["success"]
        wait_state(base, "running", 15.0)
        knee = wait_state(base, "stopped", 40.0)
        assert [row["stage"] for row in knee] == [0, 1, 2]
        assert set(knee[0]) == {key for key, _ in COLUMNS}
        assert knee[2]["users"] == 2 and knee[2]["measured"] > 0 and knee[2]["e2e_p50_ms"] > 0
        rows = list(csv.DictReader(io.StringIO(http_get(base + "/loadknee/stages.csv").decode())))
        assert [r["stage"] for r in rows] == ["0", "1", "2"]
        # run 2: the command line's long sweep, stopped from the UI
        form = {"user_count": "1", "spawn_rate": "1", "llm_levels": "4",
                "llm_stage_seconds": "30", "llm_baseline_requests": "0"}  # fmt: skip
        assert http_post(base + "/swarm", form)["success"]
        wait_state(base, "running", 15.0)
        wait_requests_counted(base, 4, 30.0)  # the sweep is under way before it is stopped
        http_post(base + "/stop")
        wait_state(base, "stopped", 30.0)
    first, second = sorted(p for p in out.iterdir() if p.is_dir())
    rd1, rd2 = read_run_dir(first), read_run_dir(second)
    check_run(rd1, levels=[1, 2], baseline=2)
    check_run(rd2, levels=[4], baseline=0, stop_reason="stopped")
    rd1.requests += rd2.requests
    assert_matches_sim(rd1, sim.log())
