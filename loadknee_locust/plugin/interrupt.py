"""Turn Ctrl-C / SIGTERM during a headless sweep into a graceful stop, and a second one into an
immediate one.

Why: Locust 2.47, headless with a shape, installs its own SIGTERM handler only after the sweep
(``main.py``: ``start_automatic_run`` joins the shape greenlet first), so during the sweep SIGTERM
had its default action: the process died with no ``quitting`` event, no final rows, no end in
``run.json`` and the running stage missing from ``stages.csv``. SIGINT raised KeyboardInterrupt
in the join, which quit without waiting for the requests in flight.

With the guard installed (master or local runner, headless, a shape), the first SIGINT or SIGTERM
only marks the run as interrupted; the shape's next tick (within a second) closes the running
stage with stop reason ``interrupted`` (a partial stage in ``stages.csv``), drops the users to 0
so the requests in flight finish within ``--stop-timeout``, and then ends the sweep; ``run.json``
gets ``stop_reason: interrupted`` and its end time, and the process exits with 128 + the signal
number. A second signal stops at once: the files are closed (readable, the requests still in
flight have no row) and the process exits without waiting.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable

log = logging.getLogger("loadknee")
# the messages start "loadknee sweep:": ``loadknee run`` shows them among its progress lines
# (Locust's other log lines go to the run directory's locust.log)

SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)


class InterruptGuard:
    """Records the first interrupt; calls ``stop_now`` on the second (which should not return)."""

    def __init__(self, stop_now: Callable[[int], None], stop_timeout_s: float) -> None:
        self.requested_unix_s: float | None = None
        self.signum: int | None = None
        self._stop_now = stop_now
        self._stop_timeout_s = stop_timeout_s

    @property
    def requested(self) -> bool:
        return self.requested_unix_s is not None

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum or signal.SIGINT)

    def install(self) -> None:
        """Handle SIGINT and SIGTERM on gevent's hub (a plain ``signal.signal`` handler would run
        inside whatever greenlet happens to be current)."""
        import gevent

        for sig in SIGNALS:
            gevent.signal_handler(sig, self.on_signal, int(sig))

    def on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self.requested_unix_s is None:
            self.requested_unix_s, self.signum = time.time(), signum
            log.warning(
                "loadknee sweep: %s: stopping the sweep; requests in flight get up to %.0f s to "
                "finish (send it again to stop at once)",
                name,
                self._stop_timeout_s,
            )
            return
        log.warning("loadknee sweep: second %s: stopping at once", name)
        self._stop_now(self.exit_code)


def exit_now(code: int) -> None:
    """Leave without Locust's shutdown (which waits for users): the caller closed the files."""
    logging.shutdown()
    os._exit(code)
