"""Scrape and parse ``/metrics`` in a process of its own, so the timing process's hub never parses.

Why a process and not a thread: a real vLLM exposes a few thousand samples, and parsing them
with ``prometheus_client`` is tens of milliseconds of pure Python. In a threadpool thread that
still holds the GIL in 5 ms slices, and every greenlet of the process that times the requests
waits behind it (``benchmarks/bench_sampler_stall.py``: a 10 ms ticker was 8-15 ms late at P99,
over 30 ms at worst, with a 2,000-sample scrape; the GIL is per process).

Parent side, :class:`ScrapeProcess`: started by the sampler with the scrape targets, it runs
``python -m loadknee_locust.telemetry.scrapeproc`` and hands it one JSON line on stdin: the
targets (credentials go through the pipe, never the command line), the interval, the timeout,
the path of ``server_metrics.csv`` and whether DCGM's GPU rows are wanted. The child owns that
file: it fetches (:class:`~loadknee_locust.telemetry.scrape.Scraper`, one greenlet per target,
on its own gevent hub), parses and writes every sample. It answers one short JSON line per
scrape on stdout: what failed (the same kinds as before), how many samples, the parse error,
and the few ``gpu.csv`` rows DCGM's samples map to. The parent only reads those lines (one
``json.loads`` of a few hundred bytes each) and keeps the warnings and ``gpu.csv`` as before.

Stopping: a ``stop`` line, or end of file on stdin (the parent exited, even killed). The child
finishes the scrape in progress (at most :data:`STOP_GRACE_S`), closes the file and exits.
SIGINT and SIGTERM sent to the whole process group (Ctrl-C in a terminal, a service manager's
stop) are ignored: they are the parent's to handle, and it stops the child in its own order,
after the load has drained, so the drain is still sampled. Ignored from the moment the child
exists (:func:`_ignore_group_signals`, before the interpreter starts: an ignored disposition
survives ``exec``, and Python leaves an ignored SIGINT ignored), not only once its imports are
done: on a loaded machine they took over half a second, and a Ctrl-C in that window killed the
scrapes for the rest of the run (CI: "exited with status -15"). The parent kills a child that has
not exited in :data:`EXIT_WAIT_S`.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import gevent.subprocess
from gevent.fileobject import FileObjectPosix

from loadknee_core import dcgm
from loadknee_core.contract import SERVER_METRIC_COLUMNS
from loadknee_core.promtext import Parsed, Sample, parse_lines, render_labels
from loadknee_locust.record.csvsink import CsvSink
from loadknee_locust.telemetry.scrape import ScrapeError, Scraper

logger = logging.getLogger(__name__)

#: how long the child lets a scrape in progress finish after it is told to stop
STOP_GRACE_S = 2.0
#: how long the parent waits for the child to exit (its start-up, the grace, closing the file)
EXIT_WAIT_S = 15.0
#: one result line of the child as the parent receives it
Result = dict[str, Any]
#: the longest the child computes without giving its CPU core back (see :class:`Pacer`)
BURST_S = 0.0005
#: how long it gives it back for
REST_S = 0.0001


class ScrapeProcess:
    """The parent's handle on one scrape process; ``on_result`` gets each line it sends.

    ``on_result`` runs on the parent's hub: it must be quick (it is handed a decoded line).
    A child that exits before :meth:`stop` (killed, crashed) is reported to it as
    ``{"exited": returncode}``.
    """

    def __init__(
        self,
        csv_path: Path,
        urls: Sequence[str],
        *,
        interval_s: float,
        timeout_s: float,
        gpu_rows: bool,
        on_result: Callable[[Result], None],
    ) -> None:
        self.config = {
            "csv": os.fspath(csv_path),
            "urls": list(urls),
            "interval_s": interval_s,
            "timeout_s": timeout_s,
            "gpu_rows": gpu_rows,
        }
        self._on_result = on_result
        self._proc: gevent.subprocess.Popen | None = None
        self._reader: gevent.Greenlet | None = None
        self._stopping = False
        self.returncode: int | None = None

    def start(self) -> None:
        """Start the child and hand it its configuration (returns at once)."""
        root = str(Path(__file__).resolve().parents[2])  # the folder holding loadknee_locust
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}
        # gevent's Popen: its exit status comes from gevent's child watcher. A stdlib Popen in a
        # process where that watcher runs (the web UI's analyze child starts it) finds its child
        # already reaped and reads status 0: a killed scrape process was reported as "exited
        # with status 0" (CI)
        self._proc = gevent.subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=gevent.subprocess.PIPE,
            stdout=gevent.subprocess.PIPE,
            env=env,
            close_fds=True,
            preexec_fn=_ignore_group_signals,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._send(json.dumps(self.config))
        stdout = FileObjectPosix(self._proc.stdout.fileno(), "rb", close=False)
        self._reader = gevent.spawn(self._read, stdout)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """Tell the child to stop, take its last lines, wait for it to exit; safe twice."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        self._stopping = True
        with contextlib.suppress(OSError, ValueError):  # a child that died has no stdin left
            self._send("stop", proc)
        with contextlib.suppress(OSError, ValueError):
            assert proc.stdin is not None
            proc.stdin.close()
        deadline = time.monotonic() + EXIT_WAIT_S
        while proc.poll() is None and time.monotonic() < deadline:
            gevent.sleep(0.02)
        if proc.poll() is None:
            logger.warning(
                "telemetry: the /metrics scrape process did not stop in %g s; killed it "
                "(server_metrics.csv may lack its last second)",
                EXIT_WAIT_S,
            )
            proc.kill()
            while proc.poll() is None:
                gevent.sleep(0.02)
        if self._reader is not None:
            self._reader.join(timeout=5.0)  # EOF follows the exit
            self._reader.kill(block=True, timeout=1.0)
            self._reader = None
        assert proc.stdout is not None
        proc.stdout.close()
        self.returncode = proc.returncode

    def _send(self, line: str, proc: gevent.subprocess.Popen | None = None) -> None:
        proc = proc or self._proc
        assert proc is not None and proc.stdin is not None
        proc.stdin.write(line.encode() + b"\n")
        proc.stdin.flush()

    def _read(self, stdout: FileObjectPosix) -> None:
        proc = self._proc
        for line in stdout:
            try:
                result = json.loads(line)
            except ValueError:
                logger.debug("telemetry: unreadable line from the scrape process: %r", line[:200])
                continue
            self._handle(result)
        if self._stopping or proc is None:
            return
        while proc.poll() is None and not self._stopping:  # EOF comes with the exit, or just before
            gevent.sleep(0.02)
        if not self._stopping:
            self._handle({"exited": proc.returncode})

    def _handle(self, result: Result) -> None:
        try:
            self._on_result(result)
        except Exception:  # the sampler's handler must not end the reading
            logger.exception("telemetry: a scrape result could not be handled")


# -- the child -------------------------------------------------------------------------------


class Pacer:
    """Breaks a long computation into bursts of at most ``burst_s`` with a short sleep between.

    Why: a separate process frees the timing process's GIL, not its CPU. On a small machine
    (2 cores, both busy) the scheduler lets a running process finish its time slice (a few ms)
    before a waking one gets the core, so a 70 ms parse delays the load generator's wake-ups
    by that much. Sleeping every half millisecond hands the core over at once; the work costs
    the same CPU, spread over a little more wall time (a lower priority does not help: the
    slice is kept whatever the nice value; an idle-class process would starve under load).
    """

    def __init__(self, burst_s: float = BURST_S, rest_s: float = REST_S) -> None:
        self.burst_s = burst_s
        self.rest_s = rest_s
        self._since = time.perf_counter()

    def check(self) -> None:
        """Sleep if the current burst is over its budget."""
        if time.perf_counter() - self._since >= self.burst_s:
            time.sleep(self.rest_s)  # the OS's sleep: the whole process gives the core back
            self._since = time.perf_counter()

    def paced(self, items: Iterable[Any], every: int = 16) -> Iterator[Any]:
        """``items``, with a :meth:`check` every ``every`` of them."""
        self._since = time.perf_counter()
        for i, item in enumerate(items):
            if i % every == 0:
                self.check()
            yield item


def record_scrape(
    sink: CsvSink, text: str, endpoint: str, stamp: float, pacer: Pacer | None = None
) -> Parsed:
    """Parse one /metrics body and append its samples (and any error row) to ``sink``."""
    lines: Iterable[str] = io.StringIO(text)
    parsed = parse_lines(lines if pacer is None else pacer.paced(lines))
    samples: Iterable[Sample] = parsed.samples
    for s in samples if pacer is None else pacer.paced(samples):
        sink.write(
            {
                "timestamp_unix_s": stamp,
                "endpoint": endpoint,
                "metric": s.metric,
                "labels": render_labels(s.labels),
                "value": s.value,
            }
        )
    if parsed.error is not None:
        sink.write(error_row(stamp, endpoint, parsed.error))
    elif not parsed.samples:
        sink.write(error_row(stamp, endpoint, "no samples"))
    return parsed


def error_row(stamp: float, endpoint: str, error: str) -> dict[str, Any]:
    """A ``server_metrics.csv`` row that says why a scrape has no samples."""
    return {"timestamp_unix_s": stamp, "endpoint": endpoint, "error": error}


class _Child:
    def __init__(self, config: dict[str, Any], out_fd: int) -> None:
        self.interval_s = float(config["interval_s"])
        self.timeout_s = float(config["timeout_s"])
        self.gpu_rows = bool(config["gpu_rows"])
        self.scrapers = [Scraper(url, timeout_s=self.timeout_s) for url in config["urls"]]
        self.sink = CsvSink(config["csv"], SERVER_METRIC_COLUMNS, append=True)
        self.stopping = gevent.event.Event()
        self._out_fd = out_fd
        self.pacer = Pacer()

    def send(self, result: Result) -> None:
        data = (json.dumps(result, allow_nan=False) + "\n").encode()
        try:
            while data:
                data = data[os.write(self._out_fd, data) :]
        except OSError:  # the parent is gone: nobody to sample for
            self.stopping.set()

    def scrape_once(self, scraper: Scraper) -> None:
        t0 = time.time()
        try:
            text = scraper.fetch()
        except ScrapeError as exc:
            stamp = (t0 + time.time()) / 2
            self.sink.write(error_row(stamp, scraper.endpoint, str(exc)))
            self.send(
                {"endpoint": scraper.endpoint, "stamp": stamp, "fail": exc.kind, "error": str(exc)}
            )
            return
        stamp = (t0 + time.time()) / 2
        parsed = record_scrape(self.sink, text, scraper.endpoint, stamp, self.pacer)
        rows = dcgm.gpu_rows(parsed.samples, stamp) if self.gpu_rows else []
        self.send(
            {
                "endpoint": scraper.endpoint,
                "stamp": stamp,
                "samples": len(parsed.samples),
                "error": parsed.error,
                "gpu": [_finite(row) for row in rows],
            }
        )

    def every(self, scraper: Scraper) -> None:
        """Scrape on a fixed tick until stopped; a tick missed is skipped, never bunched.

        The first scrape is taken even when the stop came during start-up: a sampler started
        and stopped at once still has its first sample, as it had in the parent's hub.
        """
        next_tick = time.monotonic()
        while True:
            try:
                self.scrape_once(scraper)
            except Exception as exc:  # a bug in one target must not end the others
                self.send({"bug": type(exc).__name__, "error": _describe(exc)})
            if self.stopping.is_set():
                return
            now = time.monotonic()
            next_tick += self.interval_s * max(1, math.ceil((now - next_tick) / self.interval_s))
            self.stopping.wait(max(0.0, next_tick - now))

    def watch(self, stdin: FileObjectPosix) -> None:
        """Stop at a ``stop`` line or at end of file (the parent closed the pipe, or died)."""
        with contextlib.suppress(OSError, ValueError):
            while True:
                line = stdin.readline()
                if not line or line.strip() == b"stop":
                    break
        self.stopping.set()

    def run(self, stdin: FileObjectPosix) -> None:
        watcher = gevent.spawn(self.watch, stdin)
        workers = [gevent.spawn(self.every, s) for s in self.scrapers]
        self.stopping.wait()
        gevent.joinall(workers, timeout=STOP_GRACE_S)
        gevent.killall(workers, block=True, timeout=1.0)
        watcher.kill(block=False)
        for scraper in self.scrapers:
            scraper.close()
        self.sink.close()


def _finite(row: dict[str, Any]) -> dict[str, Any]:
    """NaN/inf as None (JSON has neither; the CSV writes both as empty anyway)."""
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:160]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


#: the signals a process group receives that are the parent's to handle (module docstring)
GROUP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _ignore_group_signals() -> None:
    """In the forked child, before ``exec``: ignore :data:`GROUP_SIGNALS` (``signal.signal``
    alone: no import, no I/O, nothing that waits on a lock another thread could hold)."""
    for signum in GROUP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def main() -> int:
    """The child: read the configuration line, scrape until told to stop."""
    _ignore_group_signals()  # already from the fork; again for a child started by hand
    out_fd = os.dup(1)
    os.dup2(2, 1)  # a stray print must not end up in the result stream
    stdin = FileObjectPosix(0, "rb", close=False)
    line = stdin.readline()
    if not line:
        return 0
    _Child(json.loads(line), out_fd).run(stdin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
