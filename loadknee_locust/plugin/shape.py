"""The stepped LoadTestShape: drives the :class:`~loadknee_locust.sweep.schedule.Schedule` per tick.

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

Adaptive sweeps (refinement and early stop, on by default; :mod:`loadknee_locust.sweep.refine`) ask
after every stage what comes next. The answer is the analysis package's own knee over the stages
so far, from one long-lived judge child per sweep (:class:`~loadknee_locust.sweep.judge.
LiveJudge`, started with the sweep so its pandas import overlaps the first stages): pandas never
enters this process, the hub keeps timing the streams of other workers' rows while it runs, and
it runs during the cooldown (the stage is written first). A judgement that fails or passes its
timeout is logged and the sweep goes on as the plain grid. When the sweep ends, the judge is
closed and one ``loadknee sweep:`` line says what the early stop saved.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import gevent
from locust import LoadTestShape

from loadknee_core.refusals import refusing_stage
from loadknee_locust.plugin.options import llm_options
from loadknee_locust.plugin.wiring import Loadknee, loadknee_of, register
from loadknee_locust.record.recorder import RunLog, percentile
from loadknee_locust.sweep.judge import JUDGE_TIMEOUT_S, LiveJudge
from loadknee_locust.sweep.progress_text import (
    ProgressFacts,
    count_window_text,
    progress_text,
    stop_text,
)
from loadknee_locust.sweep.refine import LiveVerdict
from loadknee_locust.sweep.schedule import PENDING, RedLine, Schedule, SchedulePlan, stage_label

if TYPE_CHECKING:
    from loadknee_locust.curve.replay import CurveReplay

log = logging.getLogger("loadknee")

PROGRESS_EVERY_S = 10.0
#: a curve replay's spawn rate: its users change every second, so each change is made at once
CURVE_SPAWN_RATE = 100.0
DRAIN_REPORT_WAIT_S = 3.5  # > Locust's WORKER_REPORT_INTERVAL (3 s)
#: the sweep stops at the red line once this many requests in a row, over this many seconds,
#: all failed (a dead host, a wrong model, an HTML 404): nothing more can be learned from it
TOTAL_FAILURE_ROWS = 20
TOTAL_FAILURE_S = 10.0
TOTAL_FAILURE_EXIT_CODE = 3
#: a judgement still pending this long (its own timeout plus margin) is given up: the plain grid
JUDGE_WATCHDOG_S = JUDGE_TIMEOUT_S + 15.0


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
        self._judging: tuple[int, Any] | None = None  # (stage, greenlet of the child process)
        self._judging_since = 0.0
        self._said_saving = False
        self._judge: LiveJudge | None = None  # one child per adaptive sweep
        self._curve: CurveReplay | None = None  # --llm-replay-curve
        self._curve_asked: tuple[int, Any] | None = None  # (scale index, judge greenlet)
        self._curve_judged = 0  # scales whose judgement was asked for
        self._curve_delay = 0.0  # with workers: their last rows' report interval
        self._test_starting = True  # until the first tick of a shape test opens its run

    def reset_time(self) -> None:
        """Locust calls this as a shape test starts (the web UI's next run too, before its first
        tick): that tick may open a new run although the last one has stopped."""
        super().reset_time()
        self._test_starting = True

    def tick(self) -> tuple[int, float] | None:
        """One step of the sweep; an unexpected error ends the sweep instead of the shape.

        Why: Locust runs ``tick`` in its shape greenlet and only logs an exception that escapes
        it; the greenlet dies and a headless run then waits forever with no users (seen once in
        CI against llama-server). Here the error is logged with its traceback, the running
        stage is closed as partial (``interrupted``), the exit code says so, and the run ends
        like a Ctrl-C: every file already written stays readable."""
        try:
            return self._tick()
        except Exception:
            log.exception(
                "loadknee: the sweep's scheduler failed (a loadknee bug; the traceback says "
                "where); stopping the sweep, the stages so far are kept"
            )
            self._give_up()
            return None

    def _give_up(self) -> None:
        """Close what can be closed after an unexpected error, each step on its own."""
        assert self.runner is not None
        self.runner.environment.process_exit_code = 2
        run = self._run
        try:
            self._close_judge()
        except Exception:  # the sweep is ending anyway
            log.debug("loadknee: closing the judge failed", exc_info=True)
        if run is None or run.schedule is None:
            return
        try:
            run.schedule.stop(time.time(), "interrupted")
            run.add_stages(run.schedule.pop_closed())
            run.flush()
        except Exception:
            log.debug("loadknee: closing the stage failed", exc_info=True)

    def _tick(self) -> tuple[int, float] | None:
        assert self.runner is not None  # set by Locust before the first tick
        env = self.runner.environment
        lk = loadknee_of(env) or register(env)
        stopped = self._run is not None and lk.run is self._run and self._run.test_stopped
        if stopped and not self._test_starting:
            # the test stopped (a signal, the web UI's stop) while users finish: a late tick
            # must not open a new run (it did, beside a second SIGINT on a busy machine: the
            # run's files split over two directories); a new shape test's first tick does
            return None
        self._test_starting = False
        now = time.time()
        try:
            options = llm_options(env)
            plan = self._plan(options)  # checked before any file
            if plan.adaptive and _is_master(self.runner):  # judge once worker rows are in
                plan = replace(plan, judge_delay_s=DRAIN_REPORT_WAIT_S)
            run = lk.begin_run(now)
            if run.schedule is None:
                run.schedule = Schedule(plan, now)
        except (OSError, ValueError, AttributeError) as exc:  # bad options, unwritable --llm-out
            log.error("loadknee: cannot run the sweep: %s", exc)
            env.process_exit_code = 2
            return None
        if run is not self._run:
            self._new_run(run)
            if self._curve is not None:
                lk.note_run_info("curve", self._curve.loaded.info)
                run.curve_track = self._curve.track(run.schedule.start_unix_s)
                self._curve_asked, self._curve_judged = None, 0
                self._curve_delay = DRAIN_REPORT_WAIT_S if _is_master(self.runner) else 0.5
                if len(self._curve.plan.scales) > 1 and self._judge is None:
                    self._judge = LiveJudge()
                    self._judge.start()  # pandas loads while the first scale runs
        sched = run.schedule
        if sched.plan.adaptive and self._judge is None and not sched.finished:
            self._judge = LiveJudge()
            self._judge.start()  # pandas loads while the first stages run
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
        if self._curve is not None and not sched.finished:
            self._judge_curve(run, sched, now)
        red = RedLine.from_options(options)
        pos = sched.advance(
            now,
            _red_line_check(run, red) if red.enabled else None,
            users_running=self._users_still_running(),
            decide=self._decide if sched.plan.adaptive else None,
        )
        run.add_stages(sched.pop_closed())
        lk.announce(pos, now, **self.announce_facts(sched))
        self._progress(lk, run, sched, now)
        if pos.finished:
            self._close_judge()
            self._say_saving(sched)
            return None if self._drained(now) else (0, float(max(self._last_users, 1)))
        users = pos.users
        if self._curve is not None:  # the log's curve at this replay second
            opened = self._curve.stage_start(sched.start_unix_s, pos.stage)
            users = self._curve.users(pos.stage, opened, now)
        rate = float(max(users, self._last_users, 1))
        if self._curve is not None:  # reach each second's users at once (a master blocks)
            rate = CURVE_SPAWN_RATE
        self._last_users = users
        return users, rate

    def _plan(self, options: Any) -> SchedulePlan:
        """The sweep's plan, or with ``--llm-replay-curve`` the replay's windows."""
        if not options.replay_curve:
            self._curve = None
            return self.plan_from(options)
        from loadknee_locust.curve.replay import CurveReplay

        if self._curve is None or self._curve.options is not options:
            self._curve = CurveReplay(options)
        return self._curve.schedule_plan

    def _judge_curve(self, run: RunLog, sched: Schedule, now: float) -> None:
        """A curve replay at several scales stops once a finished scale is past the knee.

        When a scale's windows have all closed (and, with workers, their last rows had time to
        arrive), the judge reads the stages so far while the next scale already runs; a knee
        or red line in its answer stops the replay there (``knee_confirmed``: the scale in
        progress is closed as partial, the scales after it are not run)."""
        curve = self._curve
        assert curve is not None
        pending = self._curve_asked
        if pending is not None and pending[1].ready():
            self._curve_asked = None
            verdict: LiveVerdict | None = pending[1].value
            if verdict is not None and (verdict.knee_users or verdict.red_line_users):
                log.info(
                    "loadknee curve: scale ×%g is past the knee (knee %s, red line %s): the "
                    "replay stops",
                    curve.plan.scales[pending[0]],
                    verdict.knee_users,
                    verdict.red_line_users,
                )
                sched.stop(now, "knee_confirmed")
                run.add_stages(sched.pop_closed())
                return
        done = curve.scales_done(sched.start_unix_s, now - self._curve_delay)
        if pending is None and done > self._curve_judged and done < len(curve.plan.scales):
            self._curve_judged = done
            run.add_stages(sched.pop_closed())
            run.flush()
            judge = self._judge or LiveJudge()
            self._judge = judge
            self._curve_asked = (done - 1, gevent.spawn(judge.ask, str(run.run_dir)))

    def plan_from(self, options: Any) -> SchedulePlan:
        """The sweep's plan from the options (the open-loop shape plans its own stages)."""
        return SchedulePlan.from_options(options)

    def announce_facts(self, sched: Schedule) -> dict[str, Any]:
        """Facts sent with each stage announcement beside the position."""
        return {"stage_start_unix_s": sched.stage_start()}

    def _decide(self, stage: int) -> LiveVerdict | str | None:
        """The judgement after ``stage``: start the child at the first ask, then poll it."""
        run = self._run
        assert run is not None and run.schedule is not None
        judging = self._judging
        if judging is None or judging[0] != stage:
            run.add_stages(run.schedule.pop_closed())  # the child reads stages.csv
            run.flush()
            judge = self._judge or LiveJudge()
            self._judge = judge
            self._judging = (stage, gevent.spawn(judge.ask, str(run.run_dir)))
            self._judging_since = time.monotonic()
            return PENDING
        greenlet = judging[1]
        if not greenlet.ready():
            if time.monotonic() - self._judging_since < JUDGE_WATCHDOG_S:
                return PENDING
            # the ask bounds itself; this bounds the sweep should that ever fail
            greenlet.kill(block=False)
            self._close_judge()
            log.warning(
                "loadknee: no judgement after stage %d within %.0f s", stage, JUDGE_WATCHDOG_S
            )
            return None
        verdict: LiveVerdict | None = greenlet.value
        if verdict is None:
            log.warning(
                "loadknee sweep: no judgement after stage %d: the plain grid from here", stage
            )
        else:
            log.info(
                "loadknee: after stage %d: knee %s, red line %s, max_concurrency %s%s",
                stage,
                verdict.knee_users,
                verdict.red_line_users,
                verdict.max_concurrency,
                ""
                if verdict.slo_break_users is None
                else f", SLO capacity {verdict.slo_capacity}, SLOs broken from "
                f"{verdict.slo_break_users} users",
            )
        return verdict

    def _say_saving(self, sched: Schedule) -> None:
        if self._said_saving or not sched.plan.adaptive:
            return
        self._said_saving = True
        saving = sched.saving()
        reason = sched.position().stop_reason
        log.info(
            "loadknee sweep: %s",
            stop_text(
                reason, saving.skipped_levels, saving.refine_stages, saving.level_seconds,
                saving.saved_s,
            ),
        )  # fmt: skip

    def _users_still_running(self) -> int:
        """Users still running or finishing in-flight requests (bounded by stop_timeout: Locust
        kills them then, so a hung server cannot hold the cooldown forever).

        The schedule reads it only once a stage's window has closed, so any user still alive
        belongs to that stage: the stage closes, and its judgement reads the run directory, only
        when every one of its rows is written. (Counting them only after the shape had asked
        for 0 users closed the stage on the tick its window ended, users still streaming: the
        judgement missed their rows and the next level started with them in flight.)"""
        assert self.runner is not None
        if self._curve is not None:  # a replay's windows follow each other without a pause
            return 0
        return int(self.runner.user_count)

    def _close_judge(self) -> None:
        judge, self._judge = self._judge, None
        if judge is not None:
            judge.close()

    def _new_run(self, run: RunLog) -> None:
        self._close_judge()
        self._run = run
        self._last_users = 0
        self._finished_at = self._idle_since = None
        self._last_phase = None
        self._judging = None
        self._said_saving = False

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
        wait = DRAIN_REPORT_WAIT_S if _is_master(runner) else 0.0
        return now - self._idle_since >= wait

    def _progress(self, lk: Loadknee, run: RunLog, sched: Schedule, now: float) -> None:
        pos = sched.position()
        phase = (pos.stage, pos.phase)
        if phase == self._last_phase and now - self._last_progress < PROGRESS_EVERY_S:
            return
        self._last_phase, self._last_progress = phase, now
        stats = run.stats.get(pos.stage)
        left = sched.seconds_left(now)
        stage = sched.stages[pos.stage]
        if left is not None:
            left_text = f"{left:.0f} s left"
        else:  # a count-based window: how far this stage is instead of "?"
            asked = stage.measure_requests or stage.warmup_requests
            measured = stats.measured if stats else 0
            left_text = count_window_text(measured, asked, sched.counted_stage_eta(now))
        facts = ProgressFacts(
            label=stage_label(sched.stages, pos.stage),
            users=stage.users,
            phase=pos.phase,
            requests=stats.requests if stats else 0,
            errors=stats.errors if stats else 0,
            left=left_text,
            finished=pos.finished,
            stop_reason=pos.stop_reason,
        )
        log.info("loadknee progress: %s", progress_text(facts))


def _is_master(runner: Any) -> bool:
    from locust.runners import MasterRunner

    return isinstance(runner, MasterRunner)


def _red_line_check(run: RunLog, red: RedLine) -> Any:
    def crossed(stage: int) -> bool:
        stats = run.stage_stats(stage)
        p95 = percentile(stats.e2e_ms, 95.0)
        if refusing_stage(stats.failures, stats.e2e_ms):
            # the server's own admission limit: a capacity the sweep refines below, as below a
            # knee (the live judgement decides what comes next), not a breakdown to stop at
            log.info("loadknee: stage %d: %d requests refused at once", stage, stats.errors)
            return False
        hit = red.crossed(requests=stats.measured, errors=stats.errors, p95_ms=p95)
        if hit:
            log.warning(
                "loadknee sweep: red line at stage %d (%d/%d errors, P95 %s ms): stopping the "
                "sweep",
                stage,
                stats.errors,
                stats.measured,
                "—" if p95 is None else f"{p95:.0f}",
            )
        return hit

    return crossed


class KneeShape(SteppedShape):
    """The concrete default used by the packaged locustfiles (all settings from ``--llm-*``)."""
