"""How much does the telemetry sampler stall the gevent hub? A 10 ms ticker's lateness, off vs on.

A greenlet asks to wake every 10 ms and records how late each wake-up is (every in-flight
stream's TTFT/ITL would be late by as much, since timestamps are taken when greenlets resume).
Configurations, each run for ``--seconds`` in this one process, printed side by side:

* ``off``          — no sampler;
* ``sim``          — the sampler at ``--interval`` (default 0.5 s) scraping ``loadknee sim``
  (vLLM + DCGM names, ~40 samples per scrape) plus client CPU;
* ``big``          — the same against a local /metrics of ``--big-samples`` samples (a real
  vLLM exposes several hundred to a few thousand, mostly histogram buckets);
* ``big-in-hub``   — ``big`` with Prometheus parsing moved back onto the hub (what the
  threadpool avoids), to show why it is there.

Run: ``.venv/bin/python benchmarks/bench_sampler_stall.py [--seconds 8] [--interval 0.5]``.
Numbers are noisy on a shared machine; compare the columns of one run, not across runs.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import gevent

from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.sim.launch import SimProcess
from loadknee_locust.telemetry import TelemetrySampler

TICK_S = 0.010


def ticker(seconds: float) -> list[float]:
    """Lateness (ms) of each 10 ms wake-up over ``seconds``."""
    late: list[float] = []
    end = time.perf_counter() + seconds
    while True:
        due = time.perf_counter() + TICK_S
        if due > end:
            return late
        gevent.sleep(TICK_S)
        late.append((time.perf_counter() - due) * 1000)


def measure(seconds: float, url: str | None, interval: float, tmp: Path) -> dict[str, float]:
    sampler = None
    if url is not None:
        opts = LlmOptions(gpu="auto", metrics_url=url, sample_interval=interval)
        sampler = TelemetrySampler(tmp, opts, "")
        sampler.start()
        gevent.sleep(interval)  # past the start-up (NVML probe, first scrape)
    try:
        late = ticker(seconds)
    finally:
        if sampler is not None:
            sampler.stop()
    late.sort()
    rows = 0
    if url is not None:
        with open(tmp / "server_metrics.csv") as f:
            rows = sum(1 for _ in f) - 1
    return {
        "ticks": len(late),
        "median_ms": statistics.median(late),
        "p99_ms": late[int(0.99 * (len(late) - 1))],
        "max_ms": late[-1],
        "metric_rows": rows,
    }


def big_body(samples: int) -> bytes:
    lines = ["# TYPE vllm:e2e_request_latency_seconds histogram"]
    for i in range(samples):
        le = 0.01 * (i % 40 + 1)
        lines.append(
            f'vllm:e2e_request_latency_seconds_bucket{{le="{le:.2f}",model_name="m",'
            f'engine="{i // 40}"}} {i * 3}'
        )
    return ("\n".join(lines) + "\n").encode()


@contextmanager
def serve(body: bytes) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def parse_in_hub() -> Iterator[None]:
    original: Callable[..., Any] = TelemetrySampler._off_hub
    TelemetrySampler._off_hub = lambda self, fn, *args: fn(*args)  # type: ignore[method-assign]
    try:
        yield
    finally:
        TelemetrySampler._off_hub = original  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--big-samples", type=int, default=2000)
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        SimProcess.start("fast") as sim,
        serve(big_body(args.big_samples)) as big_url,
    ):
        configs: list[tuple[str, str | None, bool]] = [
            ("off", None, False),
            ("sim", sim.url + "/metrics", False),
            ("big", big_url, False),
            ("big-in-hub", big_url, True),
        ]
        for name, url, in_hub in configs:
            folder = Path(tmp) / name
            folder.mkdir()
            if in_hub:
                with parse_in_hub():
                    results[name] = measure(args.seconds, url, args.interval, folder)
            else:
                results[name] = measure(args.seconds, url, args.interval, folder)
    names = list(results)
    print(
        f"10 ms ticker lateness, {args.seconds:g} s per config, sampler interval "
        f"{args.interval:g} s, big = {args.big_samples} samples/scrape"
    )
    print(f"{'':14}" + "".join(f"{n:>12}" for n in names))
    for key in ("ticks", "median_ms", "p99_ms", "max_ms", "metric_rows"):
        cells = "".join(f"{results[n][key]:>12.2f}" for n in names)
        print(f"{key:14}{cells}")
    off = results["off"]["max_ms"]
    print(
        "max lateness vs off: "
        + ", ".join(f"{n} {results[n]['max_ms'] / off:.1f}x" for n in names[1:])
    )


if __name__ == "__main__":
    main()
