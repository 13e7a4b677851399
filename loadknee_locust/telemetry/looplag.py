"""How late the load generator's event loop runs: the delay every request's timestamps suffer.

Every request of a Locust process is one greenlet on one gevent hub. When the process (or the
machine it shares) is too busy, a greenlet that is ready to run waits for the hub: a token that
arrived is stamped late, a user's next request leaves late. Nothing in the requests' own rows can
tell that delay from the server's. :class:`LoopLagMeter` measures it directly: a greenlet sleeps
a short fixed interval in a loop and records the oversleep (woken minus asked), the same delay
any other greenlet of the process suffered at that moment.

:meth:`LoopLagMeter.take` returns the largest and the mean oversleep since the previous take,
which the sampler writes into ``client.csv`` (``loop_lag_max_ms``, ``loop_lag_mean_ms``) beside
the machine's load (:func:`host_load`). A take with no completed sleep since the previous one
(the loop was blocked all along) reports the sleep still in progress, so a long stall is never
read as no lag.

Only gevent, never locust: the tests import this module, and they refuse to import locust.
"""

from __future__ import annotations

import os
import time
from typing import Final, NamedTuple

import gevent

#: the meter's sleep: short enough to see a stall of a few tens of ms, cheap at ~20 wakes a second
LAG_INTERVAL_S: Final = 0.05


class Lag(NamedTuple):
    """Oversleep since the previous take, ms; ``None`` when the meter does not run."""

    max_ms: float | None
    mean_ms: float | None


class LoopLagMeter:
    """A greenlet measuring the hub's lateness; :meth:`take` reads and resets its figures."""

    def __init__(self, interval_s: float = LAG_INTERVAL_S) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval must be > 0, got {interval_s}")
        self.interval_s = interval_s
        self._greenlet: gevent.Greenlet | None = None
        self._asleep_since: float | None = None
        self._max_s = 0.0
        self._sum_s = 0.0
        self._count = 0

    @property
    def running(self) -> bool:
        return self._greenlet is not None

    def start(self) -> None:
        """Start measuring (idempotent)."""
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        """Stop measuring (safe twice)."""
        greenlet, self._greenlet = self._greenlet, None
        if greenlet is not None:
            greenlet.kill(block=False)
        self._asleep_since = None

    def take(self) -> Lag:
        """The largest and mean oversleep since the previous take, then start afresh."""
        if self._greenlet is None:
            return Lag(None, None)
        now = time.perf_counter()
        late_now = 0.0
        if self._asleep_since is not None:  # a sleep in progress that is already overdue
            late_now = max(0.0, now - self._asleep_since - self.interval_s)
        if self._count:
            lag = Lag(max(self._max_s, late_now) * 1000, self._sum_s / self._count * 1000)
        elif late_now > 0:
            lag = Lag(late_now * 1000, late_now * 1000)
        else:  # taken before the first sleep ended, on time: nothing measured yet
            lag = Lag(None, None)
        self._max_s, self._sum_s, self._count = 0.0, 0.0, 0
        return lag

    def _run(self) -> None:
        interval = self.interval_s
        while True:
            asked = time.perf_counter()
            self._asleep_since = asked
            gevent.sleep(interval)
            late = max(0.0, time.perf_counter() - asked - interval)
            self._asleep_since = None
            self._max_s = max(self._max_s, late)
            self._sum_s += late
            self._count += 1


class HostLoad(NamedTuple):
    """The machine's 1-minute load average and its CPU count (``None`` where not known)."""

    load_1m: float | None
    cpus: int | None


def host_load() -> HostLoad:
    """``os.getloadavg()[0]`` and ``os.cpu_count()``; ``None`` where the platform has none."""
    try:
        load: float | None = os.getloadavg()[0]
    except (OSError, AttributeError):  # Windows has no load average
        load = None
    return HostLoad(load, os.cpu_count())
