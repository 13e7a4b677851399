"""TelemetrySampler under gevent, against a fake /metrics server and a fake NVML: real HTTP, CSV.

The test process is not monkey-patched (Locust is not imported here): the sampler's HTTP client
and its threadpool are gevent-native, so the fake server runs in a plain thread beside the hub.
"""

from __future__ import annotations

import csv
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gevent
import gevent.subprocess
import psutil
import pytest

from loadknee_core.contract import CLIENT_COLUMNS, GPU_COLUMNS, SERVER_METRIC_COLUMNS
from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.telemetry import TelemetryConfig, TelemetrySampler
from loadknee_locust.telemetry.client import (
    LAG_FIELDS,
    REPORT_KEY,
    ProcessUsage,
    register_worker_usage,
)
from tests.support.fake_metrics_server import base_url, metrics_server, refused_url
from tests.support.fake_nvml import FakeNvml

LOGGER = "loadknee_locust.telemetry.sampler"


def options(**kw: Any) -> LlmOptions:
    """The typed options from a parsed namespace holding ``kw`` over these telemetry values."""
    base = {
        "llm_gpu": "auto",
        "llm_dcgm_url": "",
        "llm_metrics_url": "",
        "llm_sample_interval": 0.2,
    }
    return LlmOptions.from_parsed(SimpleNamespace(**{**base, **kw}))


def read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def header(path: Path) -> list[str]:
    with open(path, newline="") as f:
        return next(csv.reader(f))


def run(
    sampler: TelemetrySampler,
    seconds: float,
    until: Callable[[], bool] | None = None,
    backstop_s: float = 30.0,
) -> None:
    """Sample for ``seconds``, then on until ``until()`` holds (bounded by ``backstop_s``): a
    test that needs a count of scrapes waits for them rather than for a length of time, since
    the scrape process starts slowly on a busy machine (1 s gave one scrape under load)."""
    sampler.start()
    try:
        gevent.sleep(seconds)
        deadline = time.monotonic() + backstop_s
        while until is not None and not until() and time.monotonic() < deadline:
            gevent.sleep(0.1)
    finally:
        sampler.stop()


class Hook:
    """The part of Locust's EventHook the sampler uses."""

    def __init__(self) -> None:
        self.listeners: list[Any] = []

    def add_listener(self, fn: Any) -> None:
        self.listeners.append(fn)

    def remove_listener(self, fn: Any) -> None:
        self.listeners.remove(fn)

    def fire(self, **kw: Any) -> None:
        for fn in list(self.listeners):
            fn(**kw)


@pytest.mark.parametrize(
    ("kw", "host", "metrics", "dcgm_url"),
    [
        ({}, "http://h:8000", "http://h:8000/metrics", None),
        ({}, "http://h:8000/v1/", "http://h:8000/metrics", None),
        ({}, "", None, None),
        ({"llm_metrics_url": "none"}, "http://h:8000", None, None),
        ({"llm_metrics_url": "http://m/x"}, "http://h", "http://m/x", None),
        (
            {"llm_dcgm_url": "http://g:9400/metrics"},
            "http://h",
            "http://h/metrics",
            "http://g:9400/metrics",
        ),
        ({"llm_dcgm_url": "http://h/metrics"}, "http://h", "http://h/metrics", None),
    ],
)
def test_config_from_options(kw: dict[str, str], host: str, metrics: str, dcgm_url: str) -> None:
    cfg = TelemetryConfig.from_options(options(**kw), host)
    assert (cfg.metrics_url, cfg.dcgm_url) == (metrics, dcgm_url)
    assert cfg.interval_s == 0.2 and cfg.timeout_s == 1.0


def test_config_defaults_without_parsed_options() -> None:
    cfg = TelemetryConfig.from_options(LlmOptions.from_parsed(None), "http://h")
    assert (cfg.gpu, cfg.interval_s, cfg.metrics_url) == ("auto", 0.5, "http://h/metrics")
    with pytest.raises(ValueError, match="sample-interval"):
        TelemetryConfig.from_options(options(llm_sample_interval=0), "http://h")


def test_auto_without_local_gpu_takes_dcgm_from_server_metrics(tmp_path: Path) -> None:
    with metrics_server() as server:
        sampler = TelemetrySampler(
            tmp_path, options(), base_url(server), nvml=FakeNvml(library_missing=True)
        )
        run(sampler, 1.0)
    assert header(tmp_path / "gpu.csv") == list(GPU_COLUMNS)
    assert header(tmp_path / "server_metrics.csv") == list(SERVER_METRIC_COLUMNS)
    assert header(tmp_path / "client.csv") == list(CLIENT_COLUMNS)
    metrics = read(tmp_path / "server_metrics.csv")
    gpu = read(tmp_path / "gpu.csv")
    client = read(tmp_path / "client.csv")
    scrapes = {r["timestamp_unix_s"] for r in metrics}
    assert 3 <= len(scrapes) <= 7  # 1 s at 0.2 s, the first at once
    assert all(r["error"] == "" and r["endpoint"].endswith("/metrics") for r in metrics)
    running = [r for r in metrics if r["metric"] == "vllm:num_requests_running"]
    assert running[0]["labels"] == 'model_name="m"'
    assert "DCGM_FI_DEV_FB_USED" in {r["metric"] for r in metrics}  # the raw samples stay too
    assert {r["source"] for r in gpu} == {"dcgm"} and len(gpu) == len(scrapes)
    assert float(gpu[0]["memory_total_mib"]) == 81920 and float(gpu[0]["sm_util_pct"]) == 50
    assert gpu[0]["mem_bw_util_pct"] == ""  # not exported there: empty, not 0
    assert len(client) >= 3 and all(r["worker"] == "local" for r in client)
    assert all(float(r["memory_mib"]) > 10 for r in client)
    assert client[0]["cpu_pct"] == ""  # no window yet at the first sample: empty, not 0
    assert all(r["cpu_pct"] != "" for r in client[1:])
    # aligned: every source's samples fall in the same time window
    spans = [[float(r["timestamp_unix_s"]) for r in rows] for rows in (metrics, gpu, client)]
    assert max(min(s) for s in spans) < min(max(s) for s in spans)


@pytest.mark.parametrize("local_gpu", [False, True])
def test_a_slow_nvml_open_does_not_hold_up_the_metrics_scrapes(
    tmp_path: Path, local_gpu: bool
) -> None:
    """NVML takes 2 s to open (a cold driver): /metrics is still scraped every 0.2 s meanwhile
    (the scrape loop used to wait for the GPU decision: one scrape, then nothing until it came).
    Without a local GPU the DCGM rows scraped during the wait reach gpu.csv once it is known;
    with one, NVML's rows stand alone."""
    fake = FakeNvml(library_missing=not local_gpu, init_delay_s=2.0)
    with metrics_server() as server:
        sampler = TelemetrySampler(tmp_path, options(), base_url(server), nvml=fake)
        run(sampler, 2.5)
    scrapes = sorted({float(r["timestamp_unix_s"]) for r in read(tmp_path / "server_metrics.csv")})
    during_open = [t for t in scrapes if t < scrapes[0] + 1.8]
    assert len(during_open) >= 4, scrapes  # 9 ticks of 0.2 s fit there; the old loop made 1
    gpu = read(tmp_path / "gpu.csv")
    if local_gpu:
        assert {r["source"] for r in gpu} == {"nvml"}
    else:
        assert {r["source"] for r in gpu} == {"dcgm"}
        assert sorted(float(r["timestamp_unix_s"]) for r in gpu) == scrapes


def test_nvml_mode_ignores_dcgm_and_writes_per_gpu_rows(tmp_path: Path) -> None:
    with metrics_server() as server:
        url = base_url(server)
        sampler = TelemetrySampler(tmp_path, options(llm_gpu="nvml"), url, nvml=FakeNvml())
        run(sampler, 0.7)
    gpu = read(tmp_path / "gpu.csv")
    assert {r["source"] for r in gpu} == {"nvml"}
    assert {r["gpu_index"] for r in gpu} == {"0", "1"}
    assert {r["memory_used_mib"] for r in gpu if r["gpu_index"] == "1"} == {"2000.0"}


def test_gpu_lost_mid_run_is_visible_and_warned_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeNvml()
    sampler = TelemetrySampler(
        tmp_path, options(llm_gpu="nvml", llm_metrics_url="none"), "", nvml=fake
    )
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        sampler.start()
        gevent.sleep(0.5)
        fake.lost = {0}
        gevent.sleep(0.7)
        sampler.stop()
    gpu = read(tmp_path / "gpu.csv")
    lost = [r for r in gpu if r["gpu_index"] == "0" and r["error"]]
    assert len(lost) >= 2 and lost[0]["memory_used_mib"] == ""
    assert lost[0]["error"].startswith("NVMLError_GpuIsLost")
    assert [r for r in gpu if r["gpu_index"] == "1"][-1]["error"] == ""  # the other GPU goes on
    warnings = [r for r in caplog.records if "GpuIsLost" in r.getMessage()]
    assert len(warnings) == 1


def test_no_nvml_library_in_nvml_mode(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sampler = TelemetrySampler(
        tmp_path,
        options(llm_gpu="nvml", llm_metrics_url="none"),
        "",
        nvml=FakeNvml(library_missing=True),
    )
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        run(sampler, 0.7)
    gpu = read(tmp_path / "gpu.csv")
    assert len(gpu) >= 3 and all(r["error"].startswith("NVMLError_LibraryNotFound") for r in gpu)
    assert len([r for r in caplog.records if "LibraryNotFound" in r.getMessage()]) == 1
    assert len(read(tmp_path / "client.csv")) >= 3  # nothing else is lost


@pytest.mark.parametrize(
    ("path", "error", "kind_in_log"),
    [
        ("/garbage", "not Prometheus text", "not Prometheus text"),
        ("/500", "HTTP 500", "HTTP 500"),
        ("/empty", "no samples", "empty /metrics"),
        ("/slow", "timed out after 0.3 s", "timed out"),
        ("REFUSED", "connection refused", "connection refused"),
    ],
)
def test_scrape_failures_become_error_rows_and_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, path: str, error: str, kind_in_log: str
) -> None:
    with metrics_server(slow_s=1.0) as server:
        url = refused_url() if path == "REFUSED" else base_url(server) + path
        sampler = TelemetrySampler(
            tmp_path, options(llm_metrics_url=url, llm_gpu="none"), "http://ignored"
        )
        sampler.config = dataclasses.replace(sampler.config, timeout_s=0.3)
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            run(sampler, 1.0, until=lambda: sum(sampler.failure_counts.values()) >= 2)
    rows = read(tmp_path / "server_metrics.csv")
    errors = [r for r in rows if r["error"]]
    assert len(errors) >= 2
    assert all(r["error"].startswith(error) and r["metric"] == r["value"] == "" for r in errors)
    assert len([r for r in caplog.records if kind_in_log in r.getMessage()]) == 1
    assert len(read(tmp_path / "client.csv")) >= 3
    assert read(tmp_path / "gpu.csv") == []  # --llm-gpu none: header only


def test_dcgm_mode_warns_once_when_the_target_has_no_dcgm(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with metrics_server() as server:
        url = base_url(server) + "/nodcgm"
        sampler = TelemetrySampler(tmp_path, options(llm_gpu="dcgm", llm_metrics_url=url), "")
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            run(sampler, 0.7)
    gpu = read(tmp_path / "gpu.csv")
    # words are the product: the error recorded, and logged once, when DCGM is absent
    assert gpu and all(r["source"] == "dcgm" and r["error"].startswith("no DCGM") for r in gpu)
    # words are the product: the error recorded, and logged once, when DCGM is absent
    assert len([r for r in caplog.records if "no DCGM" in r.getMessage()]) == 1


def test_credentials_are_sent_but_never_written_or_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with metrics_server() as server:
        port = server.server_address[1]
        good = f"http://admin:s3cret@127.0.0.1:{port}/metrics"
        bad = f"http://admin:s3cret@127.0.0.1:{port}/500"
        sampler = TelemetrySampler(
            tmp_path, options(llm_metrics_url=good, llm_dcgm_url=bad, llm_gpu="none"), ""
        )
        with caplog.at_level(logging.DEBUG):
            run(sampler, 0.5)
        auth = {a for _, a in server.requests}
    assert auth == {"Basic YWRtaW46czNjcmV0"}  # admin:s3cret
    text = (tmp_path / "server_metrics.csv").read_text()
    assert f"http://127.0.0.1:{port}/metrics" in text and f"http://127.0.0.1:{port}/500" in text
    assert "s3cret" not in text and "s3cret" not in caplog.text


def test_start_stop_idempotent_and_restart_appends(tmp_path: Path) -> None:
    sampler = TelemetrySampler(tmp_path, options(llm_metrics_url="none", llm_gpu="none"), "")
    sampler.stop()  # never started: nothing happens
    sampler.start()
    sampler.start()
    gevent.sleep(0.3)
    sampler.stop()
    sampler.stop()
    first = len(read(tmp_path / "client.csv"))
    run(sampler, 0.3)
    assert len(read(tmp_path / "client.csv")) > first
    assert header(tmp_path / "client.csv") == list(CLIENT_COLUMNS)  # one header, no second


def test_master_records_a_row_per_worker_report(tmp_path: Path) -> None:
    events = SimpleNamespace(worker_report=Hook(), report_to_master=Hook())
    node = SimpleNamespace(cpu_usage=0.0, memory_usage=0)  # Locust's "not measured yet"
    runner = type("MasterRunner", (), {})()
    runner.user_count = 8
    runner.clients = {"w-a": node, "w-b": SimpleNamespace(cpu_usage=42.0, memory_usage=2**30)}
    runner.worker_indexes = {"w-a": 0, "w-b": 1}
    env = SimpleNamespace(events=events, runner=runner)
    unregister = register_worker_usage(env)  # what each worker does
    sampler = TelemetrySampler(
        tmp_path, options(llm_metrics_url="none", llm_gpu="none"), "", environment=env
    )
    sampler.start()
    report: dict[str, Any] = {"user_count": 4}
    events.report_to_master.fire(client_id="w-a", data=report)
    assert set(report[REPORT_KEY]) == {"cpu_pct", "memory_mib", *LAG_FIELDS}
    events.worker_report.fire(client_id="w-a", data=report)
    events.worker_report.fire(client_id="w-b", data={"user_count": 4})  # no plugin on w-b
    gevent.sleep(0.1)
    sampler.stop()
    events.worker_report.fire(client_id="w-b", data={})  # after stop: ignored, no error
    unregister()
    assert events.worker_report.listeners == [] and events.report_to_master.listeners == []
    rows = read(tmp_path / "client.csv")
    by_worker = {r["worker"]: r for r in rows}
    assert by_worker["master"]["users"] == "8"
    assert by_worker["0"]["users"] == "4" and by_worker["0"]["memory_mib"] != ""
    assert by_worker["1"]["cpu_pct"] == "42.0" and by_worker["1"]["memory_mib"] == "1024.0"
    assert len(rows) == 3
    for worker in ("master", "0"):  # each process measures its own lag and its host
        assert by_worker[worker]["host_cpus"] == str(os.cpu_count())
        assert float(by_worker[worker]["host_load_1m"]) >= 0
    assert by_worker["1"]["loop_lag_max_ms"] == by_worker["1"]["host_cpus"] == ""  # not sent


def test_client_rows_carry_the_loop_lag_of_a_blocked_hub(tmp_path: Path) -> None:
    """A greenlet that holds the hub for 0.3 s (a starved load generator) shows in the next
    client.csv row as a lag of at least 150 ms; the rows before it, on an idle hub, show less."""
    sampler = TelemetrySampler(
        tmp_path, options(llm_metrics_url="none", llm_gpu="none", llm_sample_interval=0.5), ""
    )
    sampler.start()
    try:
        gevent.sleep(0.6)  # two rows of an idle hub
        time.sleep(0.3)  # blocks the hub: every greenlet, the meter's too, wakes late
        gevent.sleep(0.8)
    finally:
        sampler.stop()
    rows = read(tmp_path / "client.csv")
    lags = [float(r["loop_lag_max_ms"]) for r in rows if r["loop_lag_max_ms"]]
    assert max(lags) >= 150
    assert all(float(r["loop_lag_mean_ms"]) <= float(r["loop_lag_max_ms"]) for r in rows[1:])
    assert {r["host_cpus"] for r in rows} == {str(os.cpu_count())}


def test_process_usage_accounts_for_the_cpu_seconds_a_busy_loop_burned() -> None:
    """No fixed CPU % holds on a shared machine (the loop may get a fraction of a core); the
    accounting does: the % times its window is the CPU time this process burned, which
    ``time.process_time`` (the kernel's per-process clock, read without psutil) says independently.
    A reader that lost the work, or divided it by the core count, is off by far more than the
    10 ms tick of /proc's counters."""
    wall0, cpu0 = time.monotonic(), time.process_time()
    usage = ProcessUsage()
    assert usage.read()[0] is None  # just primed
    while time.process_time() - cpu0 < 0.5:  # half a CPU second, however long that takes
        sum(i * i for i in range(10_000))
    cpu_pct, memory_mib = usage.read()
    wall, burned = time.monotonic() - wall0, time.process_time() - cpu0
    assert cpu_pct is not None
    assert cpu_pct / 100 * wall == pytest.approx(burned, rel=0.1, abs=0.03)
    assert memory_mib is not None and memory_mib > 10


def test_stop_waits_for_a_scrape_being_written(tmp_path: Path) -> None:
    """A scrape in flight when stop() is called (the server takes 0.4 s to answer) finishes and
    is written whole before stop() returns; nothing is cut or left as an error."""
    with metrics_server(slow_s=0.4) as server:
        sampler = TelemetrySampler(
            tmp_path, options(llm_gpu="none", llm_metrics_url=base_url(server) + "/slow"), ""
        )
        sampler.start()
        gevent.sleep(0.15)
        sampler.stop()
    rows = read(tmp_path / "server_metrics.csv")
    assert rows and {r["metric"] for r in rows} >= {"vllm:num_requests_running"}
    assert all(r["error"] == "" for r in rows)
    assert len({r["timestamp_unix_s"] for r in rows}) == len(server.requests)


def scrape_children() -> list[psutil.Process]:
    return [
        p
        for p in psutil.Process().children()
        if "loadknee_locust.telemetry.scrapeproc" in " ".join(p.cmdline())
    ]


def test_scrapes_run_in_a_process_of_their_own_that_ends_at_stop(tmp_path: Path) -> None:
    with metrics_server() as server:
        sampler = TelemetrySampler(tmp_path, options(llm_gpu="none"), base_url(server))
        sampler.start()
        try:
            gevent.sleep(0.5)
            children = scrape_children()
            assert len(children) == 1
        finally:
            sampler.stop()
    assert not children[0].is_running()
    assert scrape_children() == []
    assert read(tmp_path / "server_metrics.csv")
    # nothing scraped, nothing started: no process
    sampler = TelemetrySampler(tmp_path, options(llm_gpu="none", llm_metrics_url="none"), "")
    sampler.start()
    try:
        assert scrape_children() == []
    finally:
        sampler.stop()


def test_group_signals_leave_the_scrape_process_to_the_sampler_and_its_death_is_told(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SIGINT/SIGTERM to the process group (Ctrl-C) do not stop the scrapes: the sampler stops
    them after the load drained. Sent the moment the child exists, while its interpreter is
    still starting (a loaded machine took over half a second to reach the child's own handler,
    and these signals killed it there: CI). A scrape process killed outright is warned about at
    once, and stop() still returns. gevent's child watcher runs first (the web UI's analyze
    child starts it): with it, a stdlib Popen read the killed process's status as 0."""
    gevent.subprocess.Popen([sys.executable, "-c", "pass"]).wait()
    with metrics_server() as server:
        sampler = TelemetrySampler(tmp_path, options(llm_gpu="none"), base_url(server))
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            sampler.start()
            try:
                proc = sampler._scrape_process._proc  # type: ignore[union-attr]
                child = psutil.Process(proc.pid)
                child.send_signal(signal.SIGINT)
                child.send_signal(signal.SIGTERM)
                before = len(server.requests)
                deadline = time.monotonic() + 15  # its first scrapes, however slow its start
                while len(server.requests) <= before + 1 and time.monotonic() < deadline:
                    gevent.sleep(0.1)
                assert child.is_running() and len(server.requests) > before + 1
                child.kill()
                gevent.sleep(0.3)
                told = [r for r in caplog.records if "scrape process exited" in r.getMessage()]
                assert len(told) == 1 and "-9" in told[0].getMessage()
            finally:
                sampler.stop()
    assert sampler.failure_counts[("telemetry", "scrape_process")] == 1
    assert len(read(tmp_path / "client.csv")) >= 4  # the rest goes on


KILLED_PARENT = """
import sys, gevent
from types import SimpleNamespace
from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.telemetry import TelemetrySampler
opts = LlmOptions.from_parsed(SimpleNamespace(
    llm_gpu="none", llm_dcgm_url="", llm_metrics_url=sys.argv[2], llm_sample_interval=0.2))
sampler = TelemetrySampler(sys.argv[1], opts, "")
sampler.start()
print(sampler._scrape_process._proc.pid, flush=True)
gevent.sleep(60)
"""


def test_a_killed_parent_leaves_no_scrape_process_behind(tmp_path: Path) -> None:
    """SIGKILL gives the sampler no stop(): the scrape process sees its stdin close and exits."""
    with metrics_server() as server:
        parent = subprocess.Popen(
            [sys.executable, "-c", KILLED_PARENT, str(tmp_path), base_url(server) + "/metrics"],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert parent.stdout is not None
            child = psutil.Process(int(parent.stdout.readline()))
            deadline = time.monotonic() + 30
            while not read(tmp_path / "server_metrics.csv") and time.monotonic() < deadline:
                time.sleep(0.1)  # scraping (its first rows flushed)
            parent.kill()
            parent.wait(timeout=10)
            child.wait(timeout=10)  # raises TimeoutExpired if it lingers
        finally:
            if parent.poll() is None:
                parent.kill()
    assert read(tmp_path / "server_metrics.csv")
