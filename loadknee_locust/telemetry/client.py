"""The load generator's own CPU and memory, for ``client.csv``: this process, and Locust workers.

Measured the way Locust's usage monitor does it (``psutil.Process().cpu_percent()`` since the
previous call, 100 = one core; ``memory_info().rss``), but at the sampler's interval instead of
Locust's fixed 10 s, so a client-bound stage shows up while it lasts.

Distributed mode: the master samples itself (worker ``master``) and writes one row per worker
report. Locust's ``stats`` report does *not* carry CPU (only heartbeats do, and the worker's own
monitor refreshes it every 10 s), so :func:`register_worker_usage` — called on each worker —
adds this module's measurement under :data:`REPORT_KEY` to every report (every 3 s). Without it
the master falls back to the last heartbeat value Locust stored for that worker
(``runner.clients[id].cpu_usage``), where Locust's initial 0 means "not measured yet" and is
written as empty. The report also carries the worker's event-loop lag
(:class:`~loadknee_locust.telemetry.looplag.LoopLagMeter`, since its previous report) and its
host's load, so a distributed run has one lag row per worker: a starved worker, not the master,
is the one whose timestamps are late.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import psutil

from loadknee_locust.telemetry.looplag import LoopLagMeter, host_load

MIB: Final = 1024 * 1024
#: key the plugin adds to each worker's ``report_to_master`` data
REPORT_KEY: Final = "loadknee_usage"
#: the lag and host figures a worker's report carries (``client.csv`` columns of the same names)
LAG_FIELDS: Final = ("loop_lag_max_ms", "loop_lag_mean_ms", "host_load_1m", "host_cpus")
#: shortest window a CPU percentage is computed over
MIN_CPU_WINDOW_S: Final = 0.05


class ProcessUsage:
    """CPU % since the previous reading, and resident memory, of one process (default: this one)."""

    def __init__(self, pid: int | None = None) -> None:
        self._process = psutil.Process(pid)
        self._process.cpu_percent()  # the first reading is meaningless: prime it now
        self._since = time.monotonic()

    def read(self) -> tuple[float | None, float | None]:
        """``(cpu_pct, memory_mib)``; ``None`` for a value psutil could not read.

        CPU over less than :data:`MIN_CPU_WINDOW_S` (e.g. right after priming) says nothing
        and is ``None``; the window then keeps running until the next read.
        """
        try:
            with self._process.oneshot():
                memory_mib = self._process.memory_info().rss / MIB
                now = time.monotonic()
                if now - self._since < MIN_CPU_WINDOW_S:
                    return None, memory_mib
                self._since = now
                return self._process.cpu_percent(), memory_mib
        except psutil.Error:
            return None, None


def register_worker_usage(environment: Any) -> Callable[[], None]:
    """On a worker: add this process's usage and loop lag to every report sent to the master.

    Starts the worker's :class:`~loadknee_locust.telemetry.looplag.LoopLagMeter` (needs a
    running gevent hub). Returns a function that removes the listener and stops the meter.
    """
    usage = ProcessUsage()
    lag = LoopLagMeter()
    lag.start()

    def on_report_to_master(client_id: str, data: dict[str, Any], **_: Any) -> None:
        data[REPORT_KEY] = usage_report(usage, lag)

    hook = environment.events.report_to_master
    hook.add_listener(on_report_to_master)

    def unregister() -> None:
        hook.remove_listener(on_report_to_master)
        lag.stop()

    return unregister


def usage_report(usage: ProcessUsage, lag: LoopLagMeter) -> dict[str, Any]:
    """This process's ``client.csv`` figures since the previous call (not time, worker, users)."""
    cpu_pct, memory_mib = usage.read()
    late, host = lag.take(), host_load()
    return {
        "cpu_pct": cpu_pct,
        "memory_mib": memory_mib,
        "loop_lag_max_ms": late.max_ms,
        "loop_lag_mean_ms": late.mean_ms,
        "host_load_1m": host.load_1m,
        "host_cpus": host.cpus,
    }


def worker_row(
    client_id: str, data: Mapping[str, Any], runner: Any, timestamp_unix_s: float
) -> dict[str, Any]:
    """The ``client.csv`` row for one worker report received by the master."""
    usage = data.get(REPORT_KEY)
    figures: Mapping[str, Any] = {}
    if isinstance(usage, Mapping):
        cpu_pct, memory_mib = usage.get("cpu_pct"), usage.get("memory_mib")
        figures = usage
    else:
        node = getattr(runner, "clients", {}).get(client_id)
        cpu = getattr(node, "cpu_usage", 0) or None  # Locust starts at 0 before measuring
        memory = getattr(node, "memory_usage", 0) or None
        cpu_pct, memory_mib = cpu, (memory / MIB if memory else None)
    indexes = getattr(runner, "worker_indexes", {})
    return {
        "timestamp_unix_s": timestamp_unix_s,
        "worker": indexes.get(client_id, client_id),
        "cpu_pct": cpu_pct,
        "memory_mib": memory_mib,
        "users": data.get("user_count"),
        **{name: figures.get(name) for name in LAG_FIELDS},
    }


def runner_role(runner: Any) -> str:
    """``master`` on a master runner, else ``local`` (the contract's name for a single process)."""
    return "master" if type(runner).__name__ == "MasterRunner" else "local"
