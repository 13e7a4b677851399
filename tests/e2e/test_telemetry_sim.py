"""The sampler against the simulator (vLLM- and DCGM-named /metrics), under gevent and in Locust.

1. In this process (gevent, not monkey-patched): sampler + a few concurrent chat requests to
   the sim; all three CSVs come out, overlap in time, and the analysis reads them.
2. A real Locust run in a subprocess (``--processes 1``: a master and one forked worker), the
   sampler started on the master at test_start and stopped at quitting, the worker adding its
   usage to each report: ``client.csv`` has master rows and worker rows.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
import pandas as pd
import pytest
from geventhttpclient import HTTPClient

from analysis.inputs.server_metrics import canonical_timeline, gpu_from_dcgm
from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.telemetry import TelemetrySampler
from tests.support.run_support import reaped


def read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def chat(url: str, n: int) -> list[int]:
    client = HTTPClient.from_url(url, network_timeout=20, connection_timeout=5)
    body = json.dumps(
        {
            "model": "sim-llm",
            "messages": [{"role": "user", "content": "hi " * 50}],
            "max_tokens": 64,
        }
    )
    statuses = []
    try:
        for _ in range(n):
            response = client.post(
                "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"}
            )
            response.read()
            statuses.append(response.status_code)
    finally:
        client.close()
    return statuses


def test_sampler_against_the_sim_under_gevent(
    tmp_path: Path, sim_server: Callable[..., Any]
) -> None:
    sim = sim_server(preset="fast")
    opts = LlmOptions(gpu="auto", sample_interval=0.25)
    sampler = TelemetrySampler(tmp_path, opts, sim.url)
    started = time.time()
    sampler.start()
    try:
        users = [gevent.spawn(chat, sim.url, 4) for _ in range(6)]
        gevent.joinall(users, timeout=20, raise_error=True)
        gevent.sleep(0.3)
    finally:
        sampler.stop()
    held_s = time.time() - started
    metrics = pd.read_csv(tmp_path / "server_metrics.csv")
    gpu = pd.read_csv(tmp_path / "gpu.csv")
    client = pd.read_csv(tmp_path / "client.csv")
    scrapes = sorted(metrics["timestamp_unix_s"].unique() - started)
    assert [u.value for u in users] == [[200] * 4] * 6  # the load ran to its end
    assert metrics["error"].isna().all() and len(scrapes) >= 3, (held_s, scrapes)
    assert {"vllm:num_requests_running", "DCGM_FI_DEV_FB_USED"} <= set(metrics["metric"])
    # auto on a machine without NVML: the GPU comes from the sim's DCGM names
    if gpu["source"].eq("nvml").any():
        pytest.skip("this machine has a GPU: auto chose NVML")
    assert set(gpu["source"]) == {"dcgm"} and gpu["error"].isna().all()
    assert (gpu["memory_used_mib"] / gpu["memory_total_mib"]).between(0, 1).all()
    spans = [df["timestamp_unix_s"] for df in (metrics, gpu, client)]
    assert max(s.min() for s in spans) < min(s.max() for s in spans)  # overlapping in time
    timeline = canonical_timeline(metrics)
    assert len(timeline) == len(metrics["timestamp_unix_s"].unique())
    assert timeline["requests_running"].max() >= 1  # the load was seen
    assert timeline["kv_cache_usage_pct"].between(0, 100).all()
    again = gpu_from_dcgm(metrics)
    pd.testing.assert_frame_equal(
        again.drop(columns=["error", "gpu_index"]), gpu.drop(columns=["error", "gpu_index"])
    )


LOCUSTFILE = """
import os
from pathlib import Path

from locust import FastHttpUser, constant, events, task
from locust.runners import WorkerRunner

from loadknee_locust.plugin.options import llm_options
from loadknee_locust.telemetry import TelemetrySampler, register_worker_usage


class Chat(FastHttpUser):
    wait_time = constant(0.05)

    @task
    def chat(self):
        self.client.post("/v1/chat/completions", json={
            "model": "sim-llm", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16})


@events.init.add_listener
def on_init(environment, **_kw):
    if isinstance(environment.runner, WorkerRunner):
        register_worker_usage(environment)
        return
    state = {}

    def start(environment, **_kw):
        state["s"] = TelemetrySampler(
            Path(os.environ["RUN_DIR"]), llm_options(environment), environment.host,
            environment=environment)
        state["s"].start()

    def stop(environment, **_kw):
        if "s" in state:
            state["s"].stop()

    environment.events.test_start.add_listener(start)
    environment.events.quitting.add_listener(stop)
"""


@pytest.mark.slow
def test_sampler_in_a_real_distributed_locust_run(
    tmp_path: Path, sim_server: Callable[..., Any]
) -> None:
    sim = sim_server(preset="fast")
    locustfile = tmp_path / "lf.py"
    locustfile.write_text(LOCUSTFILE)
    run_dir = tmp_path / "run"
    command = [
        sys.executable, "-m", "locust", "-f", str(locustfile), "--headless", "-H", sim.url,
        "-u", "4", "-r", "4", "-t", "5s", "--processes", "1", "--only-summary",
        "--exit-code-on-error", "0",
    ]  # fmt: skip
    child = subprocess.Popen(
        command,
        env={**os.environ, "RUN_DIR": str(run_dir)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    with reaped(child) as proc:
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out[-3000:]
    client = read(run_dir / "client.csv")
    workers = {r["worker"] for r in client}
    assert "master" in workers and "0" in workers, workers
    worker_rows = [r for r in client if r["worker"] == "0"]
    assert all(float(r["memory_mib"]) > 10 for r in worker_rows)
    # reports < 50 ms apart (the first, the final ones at quit) have no CPU window: empty
    assert any(r["cpu_pct"] != "" for r in worker_rows)
    assert max(int(r["users"] or 0) for r in worker_rows) == 4
    metrics = read(run_dir / "server_metrics.csv")
    assert metrics and all(r["error"] == "" for r in metrics)
    gpu = read(run_dir / "gpu.csv")
    assert gpu and {r["source"] for r in gpu} <= {"dcgm", "nvml"}
