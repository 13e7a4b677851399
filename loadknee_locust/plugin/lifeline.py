"""Keep load from outliving its owner: a parent-death signal and a watch on the master's heartbeat.

Why: ``loadknee run`` starts Locust in its own session (so a terminal Ctrl-C reaches only the
wrapper, which forwards it). If the wrapper itself is killed (SIGKILL, OOM), nothing told the
child, which kept loading the server for the rest of the sweep with PPID 1. A process group would
not help (the wrapper's death sends nothing to its group), and a pipe watch needs a reader in
every Locust process; the kernel's parent-death signal (``prctl(PR_SET_PDEATHSIG)``) costs one
call, fires within milliseconds and needs no cooperation from the wrapper. The signal is SIGTERM,
so the plugin's interrupt guard stops the sweep gracefully and the run directory is complete.

Locust's ``--processes`` workers are forked by the master: the death signal is not inherited
across ``fork``, so each worker asks for its own (on the master). A remote worker, whose master
is on another machine, watches the master's heartbeat (sent every second) and stops its users
after :data:`MASTER_SILENCE_S` without one (Locust itself waits 60 s).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import time
from typing import Any

log = logging.getLogger("loadknee")

PR_SET_PDEATHSIG = 1
MASTER_SILENCE_S = 10.0


def die_with_parent(sig: int = signal.SIGTERM, parent_pid: int | None = None) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux only).

    ``parent_pid``: the parent expected; if it is already gone (this process was reparented
    before the call) the signal is sent at once. False where prctl is not available.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), sig)
    return True


def preexec_die_with(parent_pid: int) -> Any:
    """A ``subprocess.Popen(preexec_fn=...)`` that ties the child to ``parent_pid``'s life."""

    def preexec() -> None:
        die_with_parent(signal.SIGTERM, parent_pid)

    return preexec


def guard_worker(environment: Any) -> None:
    """On a worker: die with a forking master, and stop when the master falls silent."""
    parsed = getattr(environment, "parsed_options", None)
    if getattr(parsed, "processes", None):  # forked by the master (--processes)
        die_with_parent(signal.SIGTERM, os.getppid())
    import gevent

    gevent.spawn(_watch_master, environment.runner)


def _watch_master(runner: Any) -> None:
    while True:
        gevent_sleep(1.0)
        last = getattr(runner, "last_heartbeat_timestamp", None)
        if last and time.time() - last > MASTER_SILENCE_S:
            log.error(
                "loadknee: no heartbeat from the master for %.0f s: stopping this worker's load",
                MASTER_SILENCE_S,
            )
            runner.quit()
            return


def gevent_sleep(seconds: float) -> None:
    import gevent

    gevent.sleep(seconds)
