"""A long-lived live judge: one child per sweep answers "the knee so far" per finished stage.

``python -m analysis.live.judge`` reads one JSON request a line on stdin (``{"run_dir":
PATH}``) and answers each with one JSON line on stdout: ``{"knee_users", "red_line_users",
"max_concurrency", "stages"}`` as :mod:`analysis.live.answer` prints them, or
``{"error": TEXT}``.

Why a server and not ``python -m analysis.live.answer`` per stage: that child paid a Python
start and the pandas import (1.5–2.5 s on 2 busy cores) plus the knee's confidence resampling
(200 reruns of the knee rule, ~95 % of a judgement's time and no part of the answer) after every
stage, longer than a short cooldown, so the sweep waited. Here pandas is imported once, while the
first stages run, and each answer is :func:`analysis.live.answer.judge`'s, the same object
``python -m analysis.live.answer`` prints.

It runs at a lower CPU priority (``nice`` +10): the load generator and the server come first.
It dies with its parent: end of input (the parent closed the pipe or died) ends it, and on
Linux the kernel also sends it SIGTERM when the parent dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from typing import Any, TextIO

from analysis.live.answer import judge

#: how much lower than the load generator the judge runs
NICENESS = 10
_PR_SET_PDEATHSIG = 1


def answer(line: str) -> dict[str, Any]:
    """One request line → its answer (never raises: a failure is ``{"error": ...}``)."""
    try:
        request = json.loads(line)
        return judge(str(request["run_dir"]))
    except Exception as exc:  # any failure means "cannot judge": the sweep falls back
        return {"error": f"{type(exc).__name__}: {exc}"}


def serve(lines: TextIO, out: TextIO) -> int:
    """Answer every request line until the end of input."""
    for line in lines:
        if line.strip():
            out.write(json.dumps(answer(line)) + "\n")
            out.flush()
    return 0


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # end of input still ends it


def main() -> int:
    _die_with_parent()
    if hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(NICENESS)
    return serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    raise SystemExit(main())
