"""The sweep's live judge: one long-lived analysis child per sweep, asked once per finished stage.

The adaptive sweep (:mod:`loadknee_locust.sweep.refine`) needs the analysis's knee over the stages
so
far after every stage. The answer comes from ``python -m analysis.live.judge``, started when
the
sweep starts so its pandas import overlaps the first stages instead of a cooldown; each
:meth:`LiveJudge.ask` writes one request line and reads one answer line through
``gevent.subprocess`` pipes, so only the asking greenlet waits and the hub keeps timing streams.
pandas never enters this process.

A child that fails, answers nonsense or passes ``timeout_s`` is killed and the answer is None
(the sweep goes on as the plain grid); the next ask starts a fresh one. :meth:`close` ends it
(end of input); the child also ends by itself when this process dies (see
:mod:`analysis.live.judge`).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import gevent
from gevent import subprocess as gsubprocess

from loadknee_locust.sweep.refine import LiveVerdict

log = logging.getLogger("loadknee")

#: the live judgement reads a few thousand rows; a minute means something is wrong
JUDGE_TIMEOUT_S = 60.0

JUDGE_MODULE = "analysis.live.judge"


class LiveJudge:
    """One ``python -m analysis.live.judge`` child; :meth:`ask` from a greenlet."""

    def __init__(self, timeout_s: float = JUDGE_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._proc: Any = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> bool:
        """Start the child unless it runs; False (logged) when it cannot start."""
        if self.running:
            return True
        try:
            self._proc = gsubprocess.Popen(
                [sys.executable, "-m", JUDGE_MODULE],
                stdin=gsubprocess.PIPE,
                stdout=gsubprocess.PIPE,
                stderr=gsubprocess.DEVNULL,
                text=True,
                bufsize=1,
            )
        except OSError as exc:
            log.warning("loadknee: cannot start the live judgement: %s", exc)
            self._proc = None
            return False
        return True

    def ask(self, run_dir: str) -> LiveVerdict | None:
        """The analysis's answer over ``run_dir``'s stages so far; None on any failure."""
        if not self.start():
            return None
        proc = self._proc
        try:
            with gevent.Timeout(self.timeout_s):
                proc.stdin.write(json.dumps({"run_dir": run_dir}) + "\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
        except gevent.Timeout:
            log.warning("loadknee: the live judgement took over %.0f s; stopped it", self.timeout_s)
            self._kill()
            return None
        except (OSError, ValueError) as exc:  # a broken pipe: the child died
            log.warning("loadknee: the live judgement failed: %s", exc)
            self._kill()
            return None
        if not line:
            log.warning("loadknee: the live judgement ended without an answer")
            self._kill()
            return None
        return parse_answer(line)

    def close(self) -> None:
        """End the child (end of input; killed if it does not exit within a few seconds)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
            proc.wait(timeout=5.0)
        except (OSError, ValueError, gsubprocess.TimeoutExpired):
            proc.kill()
            proc.wait()

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


def parse_answer(line: str) -> LiveVerdict | None:
    """One answer line → a :class:`LiveVerdict`; None (logged) for an error or nonsense."""
    try:
        answer = json.loads(line)
        if "error" in answer:
            log.warning("loadknee: the live judgement failed: %s", answer["error"])
            return None
        return LiveVerdict.from_json(answer)  # the stage verdicts too: the web UI shows them
    except (ValueError, AttributeError, TypeError, KeyError) as exc:
        log.warning("loadknee: the live judgement printed no usable answer: %s", exc)
        return None
