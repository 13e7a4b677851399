"""Web UI mode driven over HTTP: POST /swarm (custom --llm-* fields from the form), the live Knee
tab in /stats/requests, its CSV download, a web-UI Stop, and two runs in one Locust process."""

from __future__ import annotations

import csv
import io
import json
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from loadknee_locust.webui import COLUMNS
from tests.run_support import (
    assert_matches_sim,
    check_run,
    child_env,
    free_port,
    locust_cmd,
    read_run_dir,
    sweep_args,
)

pytestmark = pytest.mark.slow


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return bytes(resp.read())


def _post(url: str, form: dict[str, str] | None = None) -> Any:
    data = urllib.parse.urlencode(form or {}).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=10) as resp:
        return json.loads(resp.read() or b"{}")


def _wait_state(base: str, want: str, timeout: float) -> list[dict[str, Any]]:
    """Poll /stats/requests until the runner state is ``want``; return the Knee rows seen last."""
    deadline = time.monotonic() + timeout
    knee: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        stats = json.loads(_get(base + "/stats/requests"))
        for ext in stats.get("extended_stats") or []:
            if ext["key"] == "knee" and ext["data"]:
                knee = ext["data"]
        if stats["state"] == want:
            return knee
        time.sleep(0.5)
    raise AssertionError(f"state {want!r} not reached in {timeout} s")


def test_web_ui_two_runs_knee_tab_and_stop(sim_server, tmp_path: Path) -> None:
    sim = sim_server(preset="fast")
    out = tmp_path / "runs"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = locust_cmd(
        "--web-host", "127.0.0.1", "--web-port", str(port), "--host", sim.url,
        "--stop-timeout", "10", *sweep_args(out, levels="4", stage_s=30.0, baseline=0),
    )  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env()
    )
    try:
        deadline = time.monotonic() + 30.0
        while True:
            try:
                page = _get(base + "/").decode()
                break
            except OSError:
                assert time.monotonic() < deadline, "web UI did not come up"
                time.sleep(0.3)
        assert "llm_levels" in page  # the plugin's options are custom parameters in the form
        # run 1: a complete short sweep, configured from the form
        form = {"user_count": "1", "spawn_rate": "1", "host": sim.url, "llm_levels": "1,2",
                "llm_stage_seconds": "1.5", "llm_baseline_requests": "2"}  # fmt: skip
        assert _post(base + "/swarm", form)["success"]
        _wait_state(base, "running", 15.0)
        knee = _wait_state(base, "stopped", 40.0)
        assert [row["stage"] for row in knee] == [0, 1, 2]
        assert set(knee[0]) == {key for key, _ in COLUMNS}
        assert knee[2]["users"] == 2 and knee[2]["measured"] > 0 and knee[2]["e2e_p50_ms"] > 0
        rows = list(csv.DictReader(io.StringIO(_get(base + "/loadknee/stages.csv").decode())))
        assert [r["stage"] for r in rows] == ["0", "1", "2"]
        # run 2: the command line's long sweep, stopped from the UI
        form = {"user_count": "1", "spawn_rate": "1", "llm_levels": "4",
                "llm_stage_seconds": "30", "llm_baseline_requests": "0"}  # fmt: skip
        assert _post(base + "/swarm", form)["success"]
        _wait_state(base, "running", 15.0)
        time.sleep(2.0)
        _post(base + "/stop")
        _wait_state(base, "stopped", 30.0)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    first, second = sorted(p for p in out.iterdir() if p.is_dir())
    rd1, rd2 = read_run_dir(first), read_run_dir(second)
    check_run(rd1, levels=[1, 2], baseline=2)
    check_run(rd2, levels=[4], baseline=0, stop_reason="stopped")
    rd1.requests += rd2.requests
    assert_matches_sim(rd1, sim.log())
