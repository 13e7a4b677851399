"""Sample GPU, server ``/metrics`` and client CPU every interval while a test runs, into three CSVs.

One :class:`TelemetrySampler` per run, on the master or local runner (never on workers): the
plugin calls :meth:`~TelemetrySampler.start` at ``test_start`` and :meth:`~TelemetrySampler.stop`
at the end. Each source is its own greenlet on a fixed tick (missed ticks are skipped, never
bunched; the scrape targets' greenlets live in the scrape process), so a slow scrape delays
only its own source:

* **server metrics** — ``GET --llm-metrics-url`` (default ``<host>/metrics``; ``none`` turns it
  off) and ``--llm-dcgm-url`` when given; every sample goes raw into ``server_metrics.csv``;
* **GPU** (``--llm-gpu``) — ``nvml``: local GPUs through :class:`NvmlReader`; ``dcgm``: the
  ``DCGM_FI_*`` samples of those scrapes mapped to ``gpu.csv`` (they also stay raw);
  ``auto``: NVML when it finds a local GPU, otherwise DCGM wherever a scrape carries it;
  ``none``: nothing (``gpu.csv`` holds only its header);
* **client** — this process's CPU % and memory, its event loop's lag since the previous row
  (:class:`~loadknee_locust.telemetry.looplag.LoopLagMeter`: the load generator's own
  lateness, which every request's timestamps carry) and the host's load; on a master also one
  row per worker report, with that worker's figures.

Timestamps are unix seconds: for a scrape, the midpoint of the request (the server's numbers are
from somewhere inside it); for NVML and psutil, the moment of the reading.

Nothing here blocks the gevent hub for long: the scrapes (HTTP, Prometheus parsing, the writing
of every sample to ``server_metrics.csv``, DCGM's mapping) run in a process of their own
(:mod:`~loadknee_locust.telemetry.scrapeproc`), which sends one short line per scrape back;
every NVML call runs in gevent's threadpool (``benchmarks/bench_sampler_stall.py`` measures
what is left). A failure never stops the test: it is a row whose ``error`` says what happened,
ONE warning per kind of failure is logged, and a summary of failure counts is logged at
:meth:`stop`.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import gevent
import gevent.event

from loadknee_core.contract import (
    CLIENT_COLUMNS,
    CLIENT_CSV,
    GPU_COLUMNS,
    GPU_CSV,
    SERVER_METRIC_COLUMNS,
    SERVER_METRICS_CSV,
)
from loadknee_core.promtext import redact_url
from loadknee_locust.record.csvsink import CsvSink
from loadknee_locust.telemetry.client import ProcessUsage, runner_role, usage_report, worker_row
from loadknee_locust.telemetry.looplag import LoopLagMeter
from loadknee_locust.telemetry.nvml import NvmlReader, describe
from loadknee_locust.telemetry.scrape import Scraper
from loadknee_locust.telemetry.scrapeproc import Result, ScrapeProcess

if TYPE_CHECKING:  # the options live with the Locust wiring, above this package
    from loadknee_locust.plugin.options import GpuMode, LlmOptions

logger = logging.getLogger(__name__)

#: longest wait for NVML to initialise before the sampler gives up on it for this run
_NVML_OPEN_TIMEOUT_S = 15.0
#: how long stop() lets a sampling tick in progress finish before killing it
_STOP_GRACE_S = 2.0


@dataclass(frozen=True)
class TelemetryConfig:
    """What to sample, resolved from the ``--llm-*`` options and the target host."""

    gpu: GpuMode
    metrics_url: str | None
    dcgm_url: str | None
    interval_s: float
    timeout_s: float

    @classmethod
    def from_options(cls, options: LlmOptions, host: str) -> TelemetryConfig:
        """From ``gpu``, ``metrics_url``, ``dcgm_url`` and ``sample_interval``.

        The scrape timeout is twice the interval, at least 1 s and at most 5 s.
        """
        interval = options.sample_interval
        if not interval > 0:
            raise ValueError(f"--llm-sample-interval must be > 0, got {interval}")
        metrics = options.metrics_url.strip()
        metrics_url = None if metrics.lower() == "none" else metrics or default_metrics_url(host)
        dcgm_url = options.dcgm_url.strip() or None
        if dcgm_url is not None and dcgm_url == metrics_url:
            dcgm_url = None  # one target scraped once
        return cls(
            gpu=options.gpu,
            metrics_url=metrics_url,
            dcgm_url=dcgm_url,
            interval_s=interval,
            timeout_s=min(max(2 * interval, 1.0), 5.0),
        )


def default_metrics_url(host: str) -> str | None:
    """``<host>/metrics`` (a trailing ``/v1`` is dropped: /metrics lives at the server root)."""
    base = (host or "").strip().rstrip("/")
    if not base:
        return None
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base + "/metrics"


class OnceWarner:
    """Logs the first occurrence of each kind of failure as a warning and counts them all."""

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self.counts: Counter[tuple[str, str]] = Counter()

    def failed(self, source: str, kind: str, message: str) -> None:
        key = (source, kind)
        if key not in self.counts:
            self._log.warning(
                "telemetry: %s: %s (logged once; the test goes on, each failed sample is a row "
                "with this error in the CSV)",
                source,
                message,
            )
        self.counts[key] += 1

    def summary(self) -> list[str]:
        return [
            f"{source}: {n} failed samples ({kind})" for (source, kind), n in self.counts.items()
        ]


class TelemetrySampler:
    """Writes ``gpu.csv``, ``server_metrics.csv`` and ``client.csv`` into ``run_dir``.

    ``start()`` and ``stop()`` are idempotent; ``start()`` after ``stop()`` appends to the same
    files. Needs a running gevent hub (it runs inside Locust). ``nvml`` is the test seam: a
    module object standing in for ``pynvml``.
    """

    def __init__(
        self,
        run_dir: Path,
        options: LlmOptions,
        host: str,
        *,
        environment: Any = None,
        nvml: Any = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.config = TelemetryConfig.from_options(options, host)
        self.environment = environment
        self._nvml_module = nvml
        self._warner = OnceWarner(logger)
        self._greenlets: list[gevent.Greenlet] = []
        self._stopping = gevent.event.Event()
        self._gpu_decided = gevent.event.Event()
        self._use_nvml = False
        self._sinks: dict[str, CsvSink] = {}
        self._scrape_process: ScrapeProcess | None = None
        self._reader: NvmlReader | None = None
        self._dcgm_rows_held: list[dict[str, Any]] = []  # scraped before the GPU source was known
        self._unlisten: Callable[[], None] | None = None
        self._lag = LoopLagMeter()

    @property
    def running(self) -> bool:
        return bool(self._greenlets)

    @property
    def failure_counts(self) -> Mapping[tuple[str, str], int]:
        """(source, kind) → failed samples so far."""
        return dict(self._warner.counts)

    def start(self) -> None:
        """Open the CSVs and start sampling (the first sample is taken at once)."""
        if self.running:
            return
        cfg = self.config
        self.run_dir.mkdir(parents=True, exist_ok=True)
        metrics_csv = self.run_dir / SERVER_METRICS_CSV
        CsvSink(metrics_csv, SERVER_METRIC_COLUMNS, append=True).close()  # the header; the
        # scrape process appends to it
        self._sinks = {
            GPU_CSV: CsvSink(self.run_dir / GPU_CSV, GPU_COLUMNS, append=True),
            CLIENT_CSV: CsvSink(self.run_dir / CLIENT_CSV, CLIENT_COLUMNS, append=True),
        }
        self._stopping.clear()
        self._gpu_decided.clear()
        urls = []
        for url in (cfg.metrics_url, cfg.dcgm_url):
            if url is None:
                continue
            try:
                Scraper(url, timeout_s=cfg.timeout_s)  # checks the URL; connects on first fetch
            except ValueError as exc:
                self._warner.failed(redact_url(url), "bad_url", str(exc))
            else:
                urls.append(url)
        if cfg.metrics_url is None:
            logger.info("telemetry: server /metrics scraping is off")
        spawn = self._spawn
        spawn(self._decide_gpu)
        if urls:
            self._scrape_process = ScrapeProcess(
                metrics_csv,
                urls,
                interval_s=cfg.interval_s,
                timeout_s=cfg.timeout_s,
                gpu_rows=cfg.gpu in ("auto", "dcgm"),
                on_result=self._on_scrape,
            )
            try:
                self._scrape_process.start()
            except OSError as exc:
                self._scrape_process = None
                self._warner.failed("telemetry", "no_scrape_process", describe(exc))
        usage = ProcessUsage()
        self._lag.start()
        spawn(self._every, self._client_once, usage)
        self._listen_worker_reports()

    def stop(self) -> None:
        """Stop sampling, close the CSVs, shut NVML down, log a failure summary. Safe twice."""
        if not self.running and not self._sinks:
            return
        self._stopping.set()
        # the scrape in progress finishes and its result comes back before gpu.csv closes:
        # the last scrape must not be in server_metrics.csv with no gpu.csv row beside it
        if self._scrape_process is not None:
            process, self._scrape_process = self._scrape_process, None
            process.stop()
        gevent.joinall(self._greenlets, timeout=_STOP_GRACE_S)
        gevent.killall(self._greenlets, block=True, timeout=2.0)
        self._greenlets = []
        self._lag.stop()
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        if self._reader is not None:
            reader, self._reader = self._reader, None
            _in_thread(reader.close, timeout_s=5.0)
        for sink in self._sinks.values():
            sink.close()
        self._sinks = {}
        for line in self._warner.summary():
            logger.info("telemetry: %s", line)

    # -- sources ---------------------------------------------------------------------------

    def _decide_gpu(self) -> None:
        mode = self.config.gpu
        try:
            if mode in ("nvml", "auto"):
                reader = NvmlReader(self._nvml_module)
                try:
                    found = _in_thread(reader.open, timeout_s=_NVML_OPEN_TIMEOUT_S)
                except TimeoutError as exc:  # a wedged driver: leave NVML alone for this run
                    self._warner.failed("NVML", "timeout", describe(exc))
                    return
                if mode == "nvml" or found:
                    self._reader = reader
                    self._use_nvml = True
                    logger.info("telemetry: GPU from NVML (%s GPU(s) found)", found or 0)
                    if mode == "auto" and not _is_local(self.config.metrics_url):
                        logger.info(
                            "telemetry: these are the load generator's own GPUs; if the server "
                            "runs elsewhere, use --llm-gpu dcgm (with --llm-dcgm-url) instead"
                        )
                    self._spawn(self._every, self._nvml_once, reader)
                    return
                _in_thread(reader.close, timeout_s=5.0)
                logger.info(
                    "telemetry: no local GPU through NVML (%s); GPU telemetry will come from "
                    "DCGM metrics if a scrape carries them",
                    reader.last_error,
                )
        finally:
            if not self._use_nvml and self._dcgm_rows_held:  # no local GPU: DCGM's rows stand
                self._sinks[GPU_CSV].write_many(self._dcgm_rows_held)
            self._dcgm_rows_held = []
            self._gpu_decided.set()

    def _nvml_once(self, reader: NvmlReader) -> None:
        stamp = time.time()
        try:
            rows = _in_thread(reader.sample, stamp, timeout_s=self.config.timeout_s * 5)
        except TimeoutError as exc:
            # the reader is not thread-safe: stop using it rather than call it concurrently
            self._warner.failed("NVML", "timeout", describe(exc))
            self._gpu_row_error(stamp, "nvml", f"NVML call hung: {exc}")
            self._stopping.wait()  # this source is done for the run
            return
        for row in rows:
            if row.get("error"):
                kind = str(row["error"]).split(":", 1)[0]
                self._warner.failed("NVML", kind, str(row["error"]))
        self._sinks[GPU_CSV].write_many(rows)

    def _on_scrape(self, result: Result) -> None:
        """One scrape's outcome, as the scrape process sent it (its samples are in the CSV)."""
        if "bug" in result:  # a bug in the scrape process's tick, reported rather than lost
            self._warner.failed("telemetry", str(result["bug"]), str(result["error"]))
            return
        if "exited" in result:  # killed or crashed before stop(): say so, the test goes on
            self._warner.failed(
                "telemetry",
                "scrape_process",
                f"the /metrics scrape process exited with status {result['exited']}; "
                "server metrics are no longer sampled in this run",
            )
            return
        endpoint = str(result["endpoint"])
        if result.get("fail"):
            self._warner.failed(endpoint, str(result["fail"]), str(result["error"]))
            return
        samples = int(result["samples"])
        if result["error"] is not None:
            self._warner.failed(endpoint, "bad_response", str(result["error"]))
        elif not samples:
            self._warner.failed(endpoint, "empty", "empty /metrics response")
        self._gpu_from_scrape(endpoint, result["gpu"], samples > 0, float(result["stamp"]))

    def _gpu_from_scrape(
        self, endpoint: str, rows: list[dict[str, Any]], has_samples: bool, stamp: float
    ) -> None:
        mode = self.config.gpu
        if mode not in ("auto", "dcgm") or self._sinks.get(GPU_CSV) is None:
            return
        if mode == "auto" and not self._gpu_decided.is_set():
            # NVML's open can take seconds (a driver without persistence mode; 15 s before we
            # give up on a wedged one): hold this scrape's GPU rows until the source is known
            # rather than hold up the scrape loop, which left /metrics unsampled meanwhile
            self._dcgm_rows_held += rows
            return
        if self._use_nvml:
            return
        if rows:
            self._sinks[GPU_CSV].write_many(rows)
        elif mode == "dcgm" and has_samples and self._is_gpu_target(endpoint):
            message = f"no DCGM_FI_* metrics at {endpoint}"
            self._warner.failed(endpoint, "no_dcgm", message)
            self._gpu_row_error(stamp, "dcgm", message)

    def _gpu_row_error(self, stamp: float, source: str, message: str) -> None:
        self._sinks[GPU_CSV].write({"timestamp_unix_s": stamp, "source": source, "error": message})

    def _is_gpu_target(self, endpoint: str) -> bool:
        """The DCGM URL when given, else the server's /metrics (expected to carry DCGM)."""
        if self.config.dcgm_url is not None:
            return endpoint == redact_url(self.config.dcgm_url)
        return True

    def _client_once(self, usage: ProcessUsage) -> None:
        figures = usage_report(usage, self._lag)
        runner = getattr(self.environment, "runner", None)
        self._sinks[CLIENT_CSV].write(
            {
                "timestamp_unix_s": time.time(),
                "worker": runner_role(runner),
                "users": getattr(runner, "user_count", None),
                **figures,
            }
        )

    def _listen_worker_reports(self) -> None:
        events = getattr(self.environment, "events", None)
        if events is None or not hasattr(events, "worker_report"):
            return

        def on_worker_report(client_id: str, data: dict[str, Any], **_: Any) -> None:
            sink = self._sinks.get(CLIENT_CSV)
            if sink is None or sink.closed:
                return
            runner = getattr(self.environment, "runner", None)
            sink.write(worker_row(client_id, data, runner, time.time()))

        hook = events.worker_report
        hook.add_listener(on_worker_report)
        self._unlisten = lambda: hook.remove_listener(on_worker_report)

    # -- scheduling ------------------------------------------------------------------------

    def _spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        self._greenlets.append(gevent.spawn(fn, *args))

    def _every(self, fn: Callable[..., None], *args: Any) -> None:
        """Call ``fn(*args)`` on a fixed tick until stopped; a tick missed is skipped."""
        interval = self.config.interval_s
        next_tick = time.monotonic()
        while not self._stopping.is_set():
            try:
                fn(*args)
            except gevent.GreenletExit:
                raise
            except Exception as exc:  # a bug in one source must not end the others
                logger.debug("telemetry: %s failed", getattr(fn, "__name__", fn), exc_info=True)
                self._warner.failed("telemetry", type(exc).__name__, describe(exc))
            now = time.monotonic()
            next_tick += interval * max(1, math.ceil((now - next_tick) / interval))
            self._stopping.wait(max(0.0, next_tick - now))


def _is_local(url: str | None) -> bool:
    """True for a loopback (or unknown) target: its GPU is plausibly this machine's."""
    host = urlsplit(url).hostname if url else None
    return host is None or host in ("localhost", "127.0.0.1", "::1") or host.startswith("127.")


def _in_thread(fn: Callable[..., Any], *args: Any, timeout_s: float) -> Any:
    """Run a blocking call in gevent's threadpool; the hub keeps serving other greenlets.

    Raises ``TimeoutError`` (not gevent's BaseException ``Timeout``) when the call outlives
    ``timeout_s``; the thread itself cannot be interrupted and finishes on its own.
    """
    result = gevent.get_hub().threadpool.spawn(fn, *args)
    try:
        return result.get(timeout=timeout_s)
    except gevent.Timeout as exc:
        raise TimeoutError(f"{getattr(fn, '__name__', 'call')} took over {timeout_s:g} s") from exc
