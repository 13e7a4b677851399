"""The stepped LoadTestShape: drives the :class:`~loadknee_locust.schedule.Schedule` per tick.

``tick()`` runs on the master or local runner only, about once a second. It returns
``(users, spawn_rate)`` with ``spawn_rate`` at least the change in users (each level is reached at
once; in distributed mode ``MasterRunner.start`` blocks for the whole ramp, so a slow ramp would
eat the next stage), ``(0, rate)`` during a cooldown, and ``None`` when the sweep is over — after
the last stage's cooldown, at the red line (``--llm-red-line-*``, checked over each stage's
measured rows as its cooldown ends), at ``--llm-time-limit`` or Locust's ``--run-time`` (which
Locust does not enforce for a shape), or after a sustained total failure (every request failing
for :data:`TOTAL_FAILURE_S` s and :data:`TOTAL_FAILURE_ROWS` rows: red line, exit code 3).
Before returning ``None`` it waits (at most ``stop_timeout`` + 5 s) until every user has
stopped and, with workers, one more report interval, so the last in-flight requests reach
``requests.csv``.

Each stage that ends is written to ``stages.csv`` at once, and every change of stage or phase is
announced with ``runner.send_message`` (see :mod:`loadknee_locust.plugin.wiring`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from locust import LoadTestShape

from loadknee_locust.plugin.options import llm_options
from loadknee_locust.plugin.wiring import Loadknee, loadknee_of, register
from loadknee_locust.record.recorder import RunLog, percentile
from loadknee_locust.schedule import RedLine, Schedule, SchedulePlan

log = logging.getLogger("loadknee")

PROGRESS_EVERY_S = 10.0
DRAIN_REPORT_WAIT_S = 3.5  # > Locust's WORKER_REPORT_INTERVAL (3 s)
#: the sweep stops at the red line once this many requests in a row, over this many seconds,
#: all failed (a dead host, a wrong model, an HTML 404): nothing more can be learned from it
TOTAL_FAILURE_ROWS = 20
TOTAL_FAILURE_S = 10.0
TOTAL_FAILURE_EXIT_CODE = 3


class SteppedShape(LoadTestShape):
    """Stepped concurrency from the ``--llm-*`` options; subclass (or use :class:`KneeShape`)."""

    abstract = True

    def __init__(self) -> None:
        super().__init__()
        self._run: RunLog | None = None
        self._last_users = 0
        self._finished_at: float | None = None
        self._idle_since: float | None = None
        self._last_progress = 0.0
        self._last_phase: tuple[int, str] | None = None

    def tick(self) -> tuple[int, float] | None:
        assert self.runner is not None  # set by Locust before the first tick
        env = self.runner.environment
        lk = loadknee_of(env) or register(env)
        now = time.time()
        try:
            options = llm_options(env)
            plan = SchedulePlan.from_options(options)  # checked before any file
            run = lk.begin_run(now)
            if run.schedule is None:
                run.schedule = Schedule(plan, now)
        except (OSError, ValueError, AttributeError) as exc:  # bad options, unwritable --llm-out
            log.error("loadknee: cannot run the sweep: %s", exc)
            env.process_exit_code = 2
            return None
        if run is not self._run:
            self._new_run(run)
        sched = run.schedule
        if not sched.finished and run.total_failure(
            now, rows=TOTAL_FAILURE_ROWS, seconds=TOTAL_FAILURE_S
        ):
            log.error(
                "loadknee: red line: all of the last %d requests failed over %.0f s (last: %s); "
                "stopping the sweep",
                run.failures_in_a_row,
                now - (run.failing_since or now),
                run.last_failure or "?",
            )
            sched.stop(now, "red_line")
            env.process_exit_code = TOTAL_FAILURE_EXIT_CODE
        if lk.interrupted and not sched.finished:
            assert lk.interrupt is not None
            sched.stop(now, "interrupted")  # the running stage is closed as partial
            env.process_exit_code = lk.interrupt.exit_code
        red = RedLine.from_options(options)
        pos = sched.advance(
            now,
            _red_line_check(run, red) if red.enabled else None,
            users_running=self._users_still_running(),
        )
        run.add_stages(sched.pop_closed())
        lk.announce(pos, now)
        self._progress(lk, run, sched, now)
        if pos.finished:
            return None if self._drained(now) else (0, float(max(self._last_users, 1)))
        rate = float(max(pos.users, self._last_users, 1))
        self._last_users = pos.users
        return pos.users, rate

    def _users_still_running(self) -> int:
        """Users still finishing in-flight requests after a drop to 0 (bounded by stop_timeout:
        Locust kills them then, so a hung server cannot hold the cooldown forever)."""
        assert self.runner is not None
        return int(self.runner.user_count) if self._last_users == 0 else 0

    def _new_run(self, run: RunLog) -> None:
        self._run = run
        self._last_users = 0
        self._finished_at = self._idle_since = None
        self._last_phase = None

    def _drained(self, now: float) -> bool:
        """True once users are gone and (with workers) their last report had time to arrive."""
        if self._finished_at is None:
            self._finished_at = now
        runner = self.runner
        assert runner is not None
        stop_timeout = float(runner.environment.stop_timeout or 0.0)
        if now - self._finished_at > stop_timeout + 5.0:
            log.warning(
                "loadknee: users still running %.0f s after the sweep; stopping", stop_timeout
            )
            return True
        if runner.user_count > 0:
            self._idle_since = None
            return False
        if self._idle_since is None:
            self._idle_since = now
        from locust.runners import MasterRunner

        wait = DRAIN_REPORT_WAIT_S if isinstance(runner, MasterRunner) else 0.0
        return now - self._idle_since >= wait

    def _progress(self, lk: Loadknee, run: RunLog, sched: Schedule, now: float) -> None:
        pos = sched.position()
        phase = (pos.stage, pos.phase)
        if phase == self._last_phase and now - self._last_progress < PROGRESS_EVERY_S:
            return
        self._last_phase, self._last_progress = phase, now
        stats = run.stats.get(pos.stage)
        done = stats.requests if stats else 0
        errors = stats.errors if stats else 0
        left = sched.seconds_left(now)
        left_text = "?" if left is None else f"{left:.0f} s"
        log.info(
            "loadknee progress: stage %d/%d (%s, %d users) %s | %d requests, %d errors | %s left%s",
            pos.stage,
            len(sched.stages) - 1,
            pos.kind,
            sched.stages[pos.stage].users,
            "finished" if pos.finished else pos.phase,
            done,
            errors,
            left_text,
            f" | stop: {pos.stop_reason}" if pos.finished else "",
        )


def _red_line_check(run: RunLog, red: RedLine) -> Any:
    def crossed(stage: int) -> bool:
        stats = run.stage_stats(stage)
        p95 = percentile(stats.e2e_ms, 95.0)
        hit = red.crossed(requests=stats.measured, errors=stats.errors, p95_ms=p95)
        if hit:
            log.warning(
                "loadknee: red line at stage %d (%d/%d errors, P95 %s ms): stopping the sweep",
                stage,
                stats.errors,
                stats.measured,
                "n/a" if p95 is None else f"{p95:.0f}",
            )
        return hit

    return crossed


class KneeShape(SteppedShape):
    """The concrete default used by the packaged locustfiles (all settings from ``--llm-*``)."""
