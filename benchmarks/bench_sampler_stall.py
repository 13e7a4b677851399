"""How much does the telemetry sampler stall the gevent hub? A 10 ms ticker's lateness, off vs on.

A greenlet asks to wake every 10 ms and records how late each wake-up is (every in-flight
stream's TTFT/ITL would be late by as much, since timestamps are taken when greenlets resume).
Configurations, each run for ``--seconds`` in this one process, printed side by side:

* ``off``          — no sampler;
* ``sim``          — the sampler at ``--interval`` (default 0.5 s) scraping ``loadknee sim``
  (vLLM + DCGM names, ~40 samples per scrape) plus client CPU;
* ``big``          — the same against a local /metrics of ``--big-samples`` samples (a real
  vLLM exposes several hundred to a few thousand, mostly histogram buckets);
* ``big-thread``   — the same scrapes done in this process the way the sampler did them
  before its scrape process: fetched on the hub, parsed and written in gevent's threadpool
  (the GIL is shared: the parse still stalls the hub in 5 ms slices);
* ``big-in-hub``   — fetched, parsed and written on the hub, to show why neither is done here.

Run: ``.venv/bin/python benchmarks/bench_sampler_stall.py [--seconds 8] [--interval 0.5]``.
Numbers are noisy on a shared machine; compare the columns of one run, not across runs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import gevent
import gevent.event

from loadknee_core.contract import SERVER_METRIC_COLUMNS
from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.record.csvsink import CsvSink
from loadknee_locust.sim.launch import SimProcess
from loadknee_locust.telemetry import TelemetrySampler
from loadknee_locust.telemetry.scrape import ScrapeError, Scraper
from loadknee_locust.telemetry.scrapeproc import record_scrape

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


def in_process_scrapes(
    url: str, interval: float, tmp: Path, stop: gevent.event.Event, *, threadpool: bool
) -> None:
    """The scrape loop in this process: fetch on the hub, then parse + write in gevent's
    threadpool (``threadpool``) or on the hub."""
    scraper = Scraper(url, timeout_s=min(max(2 * interval, 1.0), 5.0))
    sink = CsvSink(tmp / "server_metrics.csv", SERVER_METRIC_COLUMNS)
    pool = gevent.get_hub().threadpool
    try:
        while not stop.is_set():
            t0 = time.time()
            try:
                text = scraper.fetch()
            except ScrapeError:
                stop.wait(interval)
                continue
            stamp = (t0 + time.time()) / 2
            if threadpool:
                pool.spawn(record_scrape, sink, text, scraper.endpoint, stamp).get()
            else:
                record_scrape(sink, text, scraper.endpoint, stamp)
            stop.wait(interval)
    finally:
        scraper.close()
        sink.close()


def measure(
    seconds: float, url: str | None, interval: float, tmp: Path, mode: str = "sampler"
) -> dict[str, float]:
    sampler = None
    loop = None
    stop = gevent.event.Event()
    if url is not None and mode == "sampler":
        opts = LlmOptions(gpu="auto", metrics_url=url, sample_interval=interval)
        sampler = TelemetrySampler(tmp, opts, "")
        sampler.start()
    elif url is not None:
        threadpool = mode == "thread"
        loop = gevent.spawn(in_process_scrapes, url, interval, tmp, stop, threadpool=threadpool)
    if url is not None:
        gevent.sleep(max(interval, 1.0))  # past the start-up (NVML probe, first scrape)
    try:
        late = ticker(seconds)
    finally:
        if sampler is not None:
            sampler.stop()
        if loop is not None:
            stop.set()
            loop.join()
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


SERVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
body = open(sys.argv[1], "rb").read()
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@contextmanager
def serve(body: bytes, *, in_process: bool) -> Iterator[str]:
    """A /metrics of ``body``: in a process of its own (a real server is never inside the load
    generator), or with ``in_process`` in a thread here, where serving 200 kB holds this
    process's GIL too and so shows up in every column that scrapes it."""
    if not in_process:
        with tempfile.NamedTemporaryFile(suffix=".prom") as f:
            f.write(body)
            f.flush()
            proc = subprocess.Popen(
                [sys.executable, "-c", SERVER, f.name], stdout=subprocess.PIPE, text=True
            )
            try:
                assert proc.stdout is not None
                yield f"http://127.0.0.1:{int(proc.stdout.readline())}/metrics"
            finally:
                proc.kill()
                proc.wait()
        return

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--big-samples", type=int, default=2000)
    parser.add_argument(
        "--server-in-process",
        action="store_true",
        help="serve the big /metrics from a thread of this process (as this benchmark used to)",
    )
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        SimProcess.start("fast") as sim,
        serve(big_body(args.big_samples), in_process=args.server_in_process) as big_url,
    ):
        configs: list[tuple[str, str | None, str]] = [
            ("off", None, "sampler"),
            ("sim", sim.url + "/metrics", "sampler"),
            ("big", big_url, "sampler"),
            ("big-thread", big_url, "thread"),
            ("big-in-hub", big_url, "hub"),
        ]
        for name, url, mode in configs:
            folder = Path(tmp) / name
            folder.mkdir()
            results[name] = measure(args.seconds, url, args.interval, folder, mode)
    names = list(results)
    print(
        f"10 ms ticker lateness, {args.seconds:g} s per config, sampler interval "
        f"{args.interval:g} s, big = {args.big_samples} samples/scrape served from "
        + ("a thread of this process" if args.server_in_process else "another process")
    )
    print(f"{'':14}" + "".join(f"{n:>12}" for n in names))
    for key in ("ticks", "median_ms", "p99_ms", "max_ms", "metric_rows"):
        cells = "".join(f"{results[n][key]:>12.2f}" for n in names)
        print(f"{key:14}{cells}")
    off = results["off"]
    for key in ("p99_ms", "max_ms"):
        print(
            f"{key} minus off: "
            + ", ".join(f"{n} {results[n][key] - off[key]:+.2f}" for n in names[1:])
        )


if __name__ == "__main__":
    main()
