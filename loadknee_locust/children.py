"""Stop a child process the one way every caller wants: SIGTERM, a bounded wait, then SIGKILL.

The demo's simulator, :mod:`loadknee_locust.sim.launch`'s ``loadknee sim`` and the end-to-end
tests' Locust processes all stop their children so; a child that ignores SIGTERM (or hangs in its
shutdown) is killed rather than left running. Stdlib only: the demo imports it before any sweep.
"""

from __future__ import annotations

import subprocess
from typing import Any


def stop_child(proc: subprocess.Popen[Any], timeout_s: float) -> None:
    """SIGTERM ``proc`` (unless it has exited) and wait up to ``timeout_s`` for it; SIGKILL it
    and wait again if it is still running then."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout_s)
