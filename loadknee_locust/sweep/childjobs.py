"""Run the analysis in child processes: the web UI's live judgement, the final report.

Why children: the Locust process never imports pandas (a pandas call on the gevent hub stalls
every in-flight stream for seconds), and the knee has one implementation, in ``analysis``. Each
job runs through ``gevent.subprocess`` under a timeout, so the hub only waits on a pipe.

Every live judgement goes through :class:`~loadknee_locust.sweep.judge.LiveJudge`, the one
protocol with ``python -m analysis.live.judge``. The adaptive sweep's shape asks its own
after every stage and keeps the answer in its schedule (``Schedule.verdicts``);
:class:`ProvisionalVerdicts` gives the web UI that same answer (a stage is never judged twice)
and asks a judge of its own only for a plain grid sweep, where the shape asks nothing.
:class:`FinalReport` runs ``loadknee analyze`` once when the test stops, so ``report.html`` is
there for the person who watched."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gevent
import gevent.subprocess

from loadknee_locust.sweep.judge import LiveJudge
from loadknee_locust.sweep.refine import LiveVerdict

if TYPE_CHECKING:
    from loadknee_locust.record.recorder import RunLog

log = logging.getLogger("loadknee")

ANALYZE_TIMEOUT_S = 300.0


def _run_child(args: list[str], timeout_s: float) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)``; code -1 on a timeout (the child is killed)."""
    proc = gevent.subprocess.Popen(
        args,
        stdout=gevent.subprocess.PIPE,
        stderr=gevent.subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except gevent.subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return -1, "", f"took over {timeout_s:.0f} s; stopped it"
    return int(proc.returncode), out, err


class ProvisionalVerdicts:
    """The newest live judgement of a run for the web UI, never a second child for one stage."""

    def __init__(self) -> None:
        self.run_dir: Path | None = None
        self.asked_for = 0  # finished stages the last own job was started for
        self.result: LiveVerdict | None = None
        self._job: Any = None
        self._judge = LiveJudge()  # started at the first ask: only a plain grid asks here

    def latest(self, run: RunLog, *, now: float, settle_s: float = 0.0) -> LiveVerdict | None:
        """The judgement over the most finished stages so far.

        An adaptive sweep's shape judges every stage itself: its answers are read from the
        schedule. A plain grid is judged here, once per newly finished stage, ``settle_s`` after
        the stage ended (time for the workers' last rows to reach the master).
        """
        sched = run.schedule
        if sched is None:
            return None
        if sched.plan.adaptive:
            got = [v for _, v in sorted(sched.verdicts.items()) if v is not None]
            return got[-1] if got else None
        if run.run_dir != self.run_dir:
            self.run_dir, self.asked_for, self.result = run.run_dir, 0, None
        closed = sched.closed
        busy = self._job is not None and not self._job.ready()
        if len(closed) > self.asked_for and not busy and now >= closed[-1].end_unix_s + settle_s:
            self.asked_for = len(closed)
            run.flush()  # the child reads requests.csv and stages.csv
            self._job = gevent.spawn(self._ask, run.run_dir)
        return self.result

    def _ask(self, run_dir: Path) -> None:
        verdict = self._judge.ask(str(run_dir))
        if verdict is not None and run_dir == self.run_dir:
            self.result = verdict


#: ``loadknee analyze``'s exit code when the run cannot tell its capacity (its report is written)
CANNOT_TELL_EXIT = 3


class FinalReport:
    """``loadknee analyze`` over the finished run, once, in a child process."""

    def __init__(self) -> None:
        self.run_dir: Path | None = None
        self.state = "none"  # none | running | done | failed
        self.cannot_tell = False  # done, and the analysis could not tell a capacity (exit 3)
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
        code, _out, _err = _run_child(args, ANALYZE_TIMEOUT_S)
        # exit 3: the run cannot tell its capacity; the report is written and says why (a busy
        # machine's late load generator gives it: the user needs that page most)
        ok = code in (0, CANNOT_TELL_EXIT) and self.report_path(run_dir).is_file()
        if run_dir == self.run_dir:
            self.cannot_tell = ok and code == CANNOT_TELL_EXIT
            self.state = "done" if ok else "failed"
        if not ok:
            log.warning("loadknee: loadknee analyze %s failed (exit %d)", run_dir, code)
