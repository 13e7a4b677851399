"""Wire loadknee into one Locust Environment: options, recorder, stage messages, telemetry, web UI.

Two explicit entry points, no import side effects:

* :func:`install` ``(events)`` — call once from a locustfile (``install(locust.events)``): adds
  the ``--llm-*`` options to Locust's parser and calls :func:`register` from ``init``;
* :func:`register` ``(environment, web_ui=None)`` — attaches a :class:`Loadknee` to one
  Environment (tests call it directly, one Environment per runner).

Roles: the local runner and the master own the run (run directory, ``run.json``, ``stages.csv``,
``requests.csv``, telemetry, the web UI tab); a worker only ships its rows to the master and
stores the stage the master announces (message ``loadknee_stage``; ``LocalRunner.send_message``
calls the local handler, so one code path serves both modes). A run opens at the first shape
tick or ``test_start`` and stays open after ``test_stop`` so late worker rows still land (after
a web-UI Stop they arrive with the next periodic report); it is closed on ``quitting`` or when
the next test starts. Workers may run on other hosts with clocks of their own: stage messages and
reports carry send times, and the master moves worker rows onto its clock
(:mod:`loadknee_locust.record.clocksync`; the offsets go to ``run.json``'s ``worker_clocks``).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any

from loadknee_locust.client.credentials import take_url_credentials
from loadknee_locust.plugin.interrupt import InterruptGuard, exit_now
from loadknee_locust.plugin.options import add_arguments, llm_options
from loadknee_locust.record import rundir
from loadknee_locust.record.clocksync import (
    REPORT_CLOCK_KEY,
    SENT_KEY,
    DownwardDelay,
    WorkerClocks,
)
from loadknee_locust.record.recorder import RequestRecorder, RunLog
from loadknee_locust.sweep.schedule import Position

log = logging.getLogger("loadknee")

STAGE_MESSAGE = "loadknee_stage"
PROMPT_INFO_KEY = "loadknee_prompt_info"
_ATTR = "_loadknee"


def install(events: Any) -> None:
    """Add the options and the ``init`` hook to an events object (``locust.events``)."""

    def on_parser(parser: Any, **_: Any) -> None:
        add_arguments(parser)
        show_in_web_ui(parser)

    def on_init(environment: Any, web_ui: Any = None, **_: Any) -> None:
        take_url_credentials(environment)  # before anything stores or shows the host
        refuse_bad_options(environment)
        register(environment, web_ui=web_ui)

    events.init_command_line_parser.add_listener(on_parser)
    events.init.add_listener(on_init)


def refuse_bad_options(environment: Any) -> None:
    """Before any load: every bad ``--llm-*`` value or host in one message, then exit code 2."""
    from loadknee_locust.plugin.validate import option_problems

    parsed = getattr(environment, "parsed_options", None)
    headless = bool(getattr(parsed, "headless", False))
    host = str(environment.host or "") if headless else None  # the web UI asks for it later
    options = llm_options(environment)
    problems = option_problems(options, host)
    if options.prompt_log:
        from loadknee_core.logindex import sniff_problem

        if problem := sniff_problem(options.prompt_log):
            problems.append(problem)
    if problems:
        log.error("loadknee: cannot run the sweep: %s", "; ".join(problems))
        sys.exit(2)


def show_in_web_ui(parser: Any) -> None:
    """Make the ``--llm-*`` options editable "custom parameters" in the web UI's start form.

    Locust only marks options added through its parser's own ``add_argument``; ours are added to
    argument groups, which bypass it, so they are marked here.
    """
    for action in getattr(parser, "_actions", ()):
        if action.dest.startswith("llm_") and not hasattr(action, "include_in_web_ui"):
            action.include_in_web_ui = True
            action.is_secret = False
            action.is_required = False
            action.is_multiple = False


def register(environment: Any, web_ui: Any = None) -> Loadknee:
    """Attach loadknee to ``environment`` (its runner must exist); again: the same object."""
    existing = loadknee_of(environment)
    if existing is not None:
        return existing
    lk = Loadknee(environment, web_ui)
    setattr(environment, _ATTR, lk)
    return lk


def loadknee_of(environment: Any) -> Loadknee | None:
    return getattr(environment, _ATTR, None)


def _role(runner: Any) -> str:
    from locust.runners import MasterRunner, WorkerRunner

    if isinstance(runner, WorkerRunner):
        return "worker"
    return "master" if isinstance(runner, MasterRunner) else "local"


#: prompt-source facts each process counts for itself: the run's value is the sum over processes
SUMMED_PROMPT_COUNTERS = frozenset(
    {
        "stale_connection_retries",
        "stream_stamps",
        "setup_requests",
        "servers_closing_after_response",
        "records_sent",  # a curve replay's records, taken by each worker apart
        "records_reused",
    }
)


def combine_prompt_infos(infos: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One ``prompt_source`` from every process's latest report: a later value wins, except
    the counters in :data:`SUMMED_PROMPT_COUNTERS` (a number, or a ``{name: count}`` map), which
    add up, and lists of names, which unite."""
    merged: dict[str, Any] = {}
    for info in infos:
        for key, value in info.items():
            if key in SUMMED_PROMPT_COUNTERS and key in merged:
                merged[key] = _add_counts(merged[key], value)
            else:
                merged[key] = dict(value) if isinstance(value, Mapping) else value
    return merged


def _add_counts(a: Any, b: Any) -> Any:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return {k: _add_counts(a.get(k, 0), b.get(k, 0)) for k in sorted({*a, *b})}
    if type(a) in (int, float) and type(b) in (int, float):  # not bool, not None
        return a + b
    if isinstance(a, list) and isinstance(b, list):  # names each process found: their union
        return sorted({*a, *b})
    return b


class Loadknee:
    """loadknee's state for one Environment (no module-level state anywhere)."""

    def __init__(self, environment: Any, web_ui: Any = None) -> None:
        self.environment = environment
        runner = environment.runner
        if runner is None:
            raise RuntimeError("loadknee.register(environment) needs the runner: create it first")
        self.role = _role(runner)
        self.run: RunLog | None = None
        self.run_info: dict[str, Any] = {}
        self.stage: dict[str, Any] | None = None  # the last stage announcement
        self._telemetry: Any = None
        self._stopping: Any = None  # the greenlet finishing the last run's stop, if any
        self._prompt_info_sent: dict[str, Any] | None = None
        self._prompt_infos: dict[str, dict[str, Any]] = {}  # by process: "local", "worker <id>"
        self.interrupt: InterruptGuard | None = None
        self.clocks = WorkerClocks() if self.role == "master" else None
        self._down = DownwardDelay()  # worker: master→worker delay of the stage messages
        self.recorder = RequestRecorder(self._worker_name, self._open_run, self.clocks)
        events = environment.events
        events.request.add_listener(self.recorder.on_request)
        if self.role == "worker":
            from locust import argument_parser

            from loadknee_locust.plugin.spawncost import cache_default_args
            from loadknee_locust.telemetry.client import register_worker_usage

            # a spawn message no longer stalls this worker's users (spawncost.py says why)
            cache_default_args(argument_parser)

            events.report_to_master.add_listener(self.recorder.on_report_to_master)
            events.report_to_master.add_listener(self._ship_clock)
            events.report_to_master.add_listener(self._ship_prompt_info)
            # fresh CPU/memory in every report (Locust's own heartbeat value is 10 s old), so
            # the master's client.csv can flag a worker that, not the server, was the limit
            register_worker_usage(environment)
            from loadknee_locust.plugin.lifeline import guard_worker

            guard_worker(environment)
        if self.role == "master":
            events.worker_report.add_listener(self.recorder.on_worker_report)
            events.worker_report.add_listener(self._take_prompt_info)
        else:
            runner.register_message(STAGE_MESSAGE, self._on_stage_message)
        if self.role != "worker":
            events.test_start.add_listener(self._on_test_start)
            events.test_stop.add_listener(self._on_test_stop)
            events.quitting.add_listener(self._on_quitting)
            self._default_stop_timeout()
            self._guard_interrupts()
            if web_ui is not None:
                from loadknee_locust.webui import tab as webui

                webui.install(web_ui, self)

    # -- roles and messages -------------------------------------------------------------------

    def _worker_name(self) -> str:
        if self.role == "worker":
            return str(getattr(self.environment.runner, "worker_index", ""))
        return "local"

    def _open_run(self) -> RunLog | None:
        run = self.run
        return run if run is not None and not run.closed else None

    def _on_stage_message(self, environment: Any = None, msg: Any = None, **_: Any) -> None:
        if msg is not None and isinstance(msg.data, dict):
            self._down.observe(msg.data, time.time())
            self.stage = dict(msg.data)

    def _ship_clock(self, client_id: Any = None, data: Any = None, **_: Any) -> None:
        """Worker: this report's send time and the stage messages' delay, for the master."""
        if data is not None:
            data[REPORT_CLOCK_KEY] = self._down.report(self._worker_name(), time.time())

    def announce(self, pos: Position, now: float, **facts: Any) -> None:
        """Tell workers (and, locally, ourselves) the stage; only on a change. ``facts`` go
        along (the stage's start, the open loop's dispatcher count) but are no change alone."""
        data: dict[str, Any] = {
            "stage": pos.stage,
            "kind": pos.kind,
            "phase": pos.phase,
            "users": pos.users,
        }
        if self.stage is not None and all(self.stage.get(k) == v for k, v in data.items()):
            return
        data.update(facts)
        data["unix_s"] = now
        data["finished"] = pos.finished
        if self.role == "master":
            self.stage = dict(data)
        data[SENT_KEY] = time.time()  # as late as possible: workers measure the trip from it
        self.environment.runner.send_message(STAGE_MESSAGE, data)

    # -- the run ------------------------------------------------------------------------------

    def begin_run(self, now: float | None = None) -> RunLog:
        """The open run, or a new one (run directory, run.json, files, telemetry): idempotent."""
        run = self.run
        if run is not None and not run.closed and not run.test_stopped:
            return run
        self.join_stop()
        if run is not None:
            self.close_run()
        now = time.time() if now is None else now
        opts = llm_options(self.environment)
        run_dir = rundir.create_run_dir(opts.out, opts.run_id, now)
        self.run = RunLog(run_dir, batch_size=opts.batch_size)
        self.run_info = self._run_info(run_dir, now)
        rundir.write_run_json(run_dir, self.run_info)
        self.recorder.drain_into(self.run)
        self._start_telemetry(run_dir)
        log.info("loadknee: run directory %s", run_dir.resolve())
        return self.run

    def note_run_info(self, key: str, value: Any) -> None:
        """One more part of run.json (the curve replay's plan, say), written at once."""
        if self.run is not None:
            self.run_info[key] = value
            rundir.write_run_json(self.run.run_dir, self.run_info)

    def _run_info(self, run_dir: Any, now: float) -> dict[str, Any]:
        env = self.environment
        workers = getattr(env.runner, "worker_count", 0) if self.role == "master" else 0
        return rundir.build_run_info(
            run_id=run_dir.name,
            start_unix_s=now,
            host=str(env.host or ""),
            options=llm_options(env),
            parsed=env.parsed_options,
            mode=self.role,
            worker_count=workers,
            stop_timeout_s=env.stop_timeout,
            secret_names=_secret_option_names(),
        )

    def _start_telemetry(self, run_dir: Any) -> None:
        try:
            from loadknee_locust.telemetry import TelemetrySampler
        except ImportError:
            return
        try:
            self._telemetry = TelemetrySampler(
                run_dir,
                llm_options(self.environment),
                str(self.environment.host or ""),
                environment=self.environment,
            )
            self._telemetry.start()
        except Exception:  # telemetry must never stop the load test
            log.exception("loadknee: telemetry did not start; the run goes on without it")
            self._telemetry = None

    def _stop_telemetry(self) -> None:
        if self._telemetry is not None:
            try:
                self._telemetry.stop()
            except Exception:
                log.exception("loadknee: telemetry did not stop cleanly")
            self._telemetry = None

    def _on_test_start(self, environment: Any = None, **_: Any) -> None:
        self.begin_run()

    def _on_test_stop(self, environment: Any = None, **_: Any) -> None:
        run = self.run
        if run is None or run.test_stopped:
            return
        now = time.time()
        if run.schedule is not None:
            run.schedule.stop(now, "interrupted" if self.interrupted else "stopped")
            run.add_stages(run.schedule.pop_closed())
        run.test_stopped = True
        # Locust marks the runner stopped before its test_stop listeners run and ends its shape
        # only after them: a listener that yields (the telemetry's last scrape can take seconds)
        # opens a window in which the web UI's next Start is dropped ("There is an ongoing shape
        # test running"). So the slow part runs beside, and whatever needs it joins it.
        import gevent

        self._stopping = gevent.spawn(self._finish_stop, run, now)

    def _finish_stop(self, run: RunLog, now: float) -> None:
        """The stop's slow part: the telemetry's last scrape and files, then run.json's end."""
        self._stop_telemetry()
        self._update_end(run, now)

    def join_stop(self) -> None:
        """Wait for the last run's stop to finish (telemetry closed, run.json's end written)."""
        stopping, self._stopping = self._stopping, None
        if stopping is not None:
            stopping.join()

    def _local_prompt_info(self) -> dict[str, Any] | None:
        """What the LLM users learned in this process (calibration, model), if any ran here."""
        users = sys.modules.get("loadknee_locust.client.state") or sys.modules.get(
            "loadknee_locust.client.users"
        )
        if users is None or not hasattr(self.environment, "loadknee_llm_state"):
            return None  # no LLM users here (the master, or a custom locustfile)
        try:
            return dict(users.prompt_source_info(self.environment))
        except Exception:
            log.exception("loadknee: could not read the prompt source's info")
            return None

    def _merge_prompt_info(self, info: dict[str, Any] | None, source: str = "local") -> None:
        """Keep each process's latest info; the run's is their combination (counters summed)."""
        if not info:
            return
        self._prompt_infos[source] = info
        combined = combine_prompt_infos(self._prompt_infos.values())
        self.run_info["prompt_source"] = {**self.run_info.get("prompt_source", {}), **combined}
        if not self.run_info.get("model") and info.get("model"):
            self.run_info["model"] = info["model"]

    def _ship_prompt_info(self, client_id: Any = None, data: Any = None, **_: Any) -> None:
        """Worker: send the prompt source's info to the master whenever it changed."""
        info = self._local_prompt_info()
        if info and info != self._prompt_info_sent and data is not None:
            data[PROMPT_INFO_KEY] = self._prompt_info_sent = info

    def _take_prompt_info(self, client_id: Any = None, data: Any = None, **_: Any) -> None:
        info = data.get(PROMPT_INFO_KEY) if isinstance(data, dict) else None
        if isinstance(info, dict) and self.run is not None:
            self._merge_prompt_info(info, source=f"worker {client_id}")

    def _update_end(self, run: RunLog, now: float) -> None:
        self._merge_prompt_info(self._local_prompt_info())
        sched = run.schedule
        reason = None
        if sched is not None and sched.finished:
            reason = sched.position().stop_reason
        self.run_info.update(
            end_unix_s=now, stop_reason=reason, requests_recorded=run.requests.rows_written
        )
        if self.clocks is not None:
            self.run_info["worker_clocks"] = self.clocks.as_json()
        rundir.write_run_json(run.run_dir, self.run_info)

    def _on_quitting(self, environment: Any = None, **_: Any) -> None:
        self.close_run()

    def close_run(self) -> None:
        """Finish the run: stop telemetry, write the last facts, close the files; safe twice."""
        run = self.run
        if run is None or run.closed:
            return
        if not run.test_stopped:
            self._on_test_stop()
        self.join_stop()
        self._stop_telemetry()
        end = self.run_info.get("end_unix_s") or time.time()
        self._update_end(run, end)
        run.close()

    @property
    def interrupted(self) -> bool:
        return self.interrupt is not None and self.interrupt.requested

    def _guard_interrupts(self) -> None:
        """Headless with a shape: Ctrl-C / SIGTERM end the sweep gracefully (see interrupt.py)."""
        env = self.environment
        parsed = getattr(env, "parsed_options", None)
        if env.shape_class is None or not getattr(parsed, "headless", False):
            return
        self.interrupt = InterruptGuard(self._stop_now, float(env.stop_timeout or 0.0))
        self.interrupt.install()

    def _stop_now(self, code: int) -> None:
        """The second interrupt: close the running stage and the files, then leave at once."""
        run = self.run
        if run is not None and not run.closed and run.schedule is not None:
            run.schedule.stop(time.time(), "interrupted")
            run.add_stages(run.schedule.pop_closed())
        self.close_run()
        exit_now(code)

    def _default_stop_timeout(self) -> None:
        """In-flight requests are lost when Locust kills users: give them time to finish."""
        env = self.environment
        if env.stop_timeout:
            return
        env.stop_timeout = llm_options(env).request_timeout
        log.warning(
            "loadknee: --stop-timeout was not set; using %.0f s so that requests in flight at a "
            "stage change or at stop complete instead of being lost",
            env.stop_timeout,
        )


def _secret_option_names() -> set[str]:
    """Options Locust marks ``is_secret`` (a fresh parser: its listeners have no side effects)."""
    try:
        from locust.argument_parser import get_parser

        parser = get_parser(default_config_files=[])
    except Exception:
        return set()
    return {a.dest for a in parser._actions if getattr(a, "is_secret", False)}
