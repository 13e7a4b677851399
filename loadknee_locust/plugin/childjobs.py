"""Run the analysis in child processes for the web UI: provisional verdicts, the final report.

Why children: the Locust process never imports pandas (a pandas call on the gevent hub stalls
every in-flight stream for seconds, LOCUST-NOTES §7), and the knee has one implementation, in
``analysis``. Each job is ``gevent.subprocess`` under a timeout in its own greenlet, so the hub
only waits on a pipe. :class:`ProvisionalVerdicts` asks ``python -m analysis.live_verdicts`` at
most once per finished stage; :func:`analyze_in_child` runs ``loadknee analyze`` once when the
test stops, so ``report.html`` is there for the person who watched.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import gevent
import gevent.subprocess

log = logging.getLogger("loadknee")

VERDICT_TIMEOUT_S = 60.0
ANALYZE_TIMEOUT_S = 300.0


def _run_child(args: list[str], timeout_s: float) -> tuple[int, str]:
    """``(exit code, stdout)``; code -1 on a timeout (the child is killed)."""
    proc = gevent.subprocess.Popen(
        args,
        stdout=gevent.subprocess.PIPE,
        stderr=gevent.subprocess.PIPE,
        text=True,
    )
    try:
        out, _err = proc.communicate(timeout=timeout_s)
    except gevent.subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return -1, ""
    return int(proc.returncode), out


class ProvisionalVerdicts:
    """The analysis's verdicts of the finished stages, refreshed once per newly finished stage."""

    def __init__(self) -> None:
        self.run_dir: Path | None = None
        self.asked_for = -1  # number of finished stages the last job was started for
        self.result: dict[str, Any] = {}
        self._job: Any = None

    def refresh(self, run_dir: Path, finished_stages: int) -> None:
        """Start a job when more stages finished than last asked for (and none is running)."""
        if run_dir != self.run_dir:
            self.run_dir, self.asked_for, self.result = run_dir, -1, {}
        if finished_stages <= self.asked_for or finished_stages == 0:
            return
        if self._job is not None and not self._job.ready():
            return
        self.asked_for = finished_stages
        self._job = gevent.spawn(self._ask, run_dir)

    def _ask(self, run_dir: Path) -> None:
        args = [sys.executable, "-m", "analysis.live_verdicts", str(run_dir)]
        code, out = _run_child(args, VERDICT_TIMEOUT_S)
        try:
            data = json.loads(out) if out else {}
        except ValueError:
            data = {}
        if code == 0 and "stages" in data and run_dir == self.run_dir:
            self.result = data
        elif code != 0:
            log.info("loadknee: provisional verdicts not available yet (%s)", data.get("error"))

    def by_stage(self) -> dict[int, dict[str, Any]]:
        return {int(s["stage"]): s for s in self.result.get("stages", [])}


class FinalReport:
    """``loadknee analyze`` over the finished run, once, in a child process."""

    def __init__(self) -> None:
        self.run_dir: Path | None = None
        self.state = "none"  # none | running | done | failed
        self._job: Any = None

    def report_path(self, run_dir: Path) -> Path:
        return run_dir / "report" / "report.html"

    def start(self, run_dir: Path) -> None:
        if self.run_dir == run_dir and self.state in ("running", "done"):
            return
        self.run_dir = run_dir
        if self.report_path(run_dir).is_file():
            self.state = "done"
            return
        self.state = "running"
        self._job = gevent.spawn(self._analyze, run_dir)

    def _analyze(self, run_dir: Path) -> None:
        args = [sys.executable, "-m", "analysis.cli", str(run_dir), "--quiet"]
        code, _out = _run_child(args, ANALYZE_TIMEOUT_S)
        ok = code == 0 and self.report_path(run_dir).is_file()
        if run_dir == self.run_dir:
            self.state = "done" if ok else "failed"
        if not ok:
            log.warning("loadknee: loadknee analyze %s failed (exit %d)", run_dir, code)
