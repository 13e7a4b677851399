"""The open-loop user: each planned request sent at its time, at most --llm-max-in-flight at once.

One :class:`OpenLoopUser` runs per process (the :class:`~loadknee_locust.arrivals.shape.
OpenLoopShape` asks for one per worker). When a stage opens (the shape's announcement carries
its start, ``stage_start_unix_s``) it takes its share of the stage's schedule
(:mod:`loadknee_locust.arrivals.plan`) and, for each arrival, sleeps until the planned time,
takes a free slot and spawns the send in a greenlet of its own: the next arrival never waits for
an answer. A slot is an :class:`ArrivalSender`, a full :class:`~loadknee_locust.client.users.
LLMUser` with its own connection pool that sends one request at a time, so the request path
(stream reading, timing, outcome, its one event and row) is the closed loop's, unchanged.

When every slot is busy, the arrival waits for one; its row keeps the planned time
(``intended_unix_s``), the wait (``send_wait_ms``) and the latency from the planned time
(``e2e_intended_ms``): the wait is never hidden (no coordinated omission). A baseline stage
(``--llm-baseline-requests``) stays closed loop: one request after the other.

The planned times are on the master's clock (the announced stage start) and a worker sleeps on
its own: workers on one host share the clock; a worker on another host whose clock is off by θ
sends θ off plan, and its rows show it as ``send_wait_ms`` once the master moves their start
onto its clock (``record/clocksync``).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent
import gevent.lock
import gevent.pool
from locust.exception import StopUser

from loadknee_locust.arrivals.plan import Arrival, OpenLoopPlan, cap_share, log_arrivals, share
from loadknee_locust.client.users import LLMUser
from loadknee_locust.plugin.options import llm_options
from loadknee_locust.plugin.wiring import loadknee_of
from loadknee_locust.prompts import Prompt
from loadknee_locust.prompts.model import Endpoint

log = logging.getLogger("loadknee")

_IDLE_POLL_S = 0.05  # between stages: how often the dispatcher looks for the next one


class ArrivalSender(LLMUser):
    """One slot: one request at a time, sent for a planned arrival (not a Locust-run user)."""

    abstract = True

    def __init__(
        self,
        environment: Any,
        host: str | None,
        endpoint: Endpoint,
        request_name: str,
        batch_size: int | None,
    ) -> None:
        # instance attributes shadow LLMUser's class defaults for this slot only; Locust sets
        # ``host`` on the classes it runs, and this one it does not run
        self.host = host
        self.endpoint = endpoint  # type: ignore[misc]
        self.request_name = request_name  # type: ignore[misc]
        self.batch_size = batch_size  # type: ignore[misc]
        super().__init__(environment)
        self.arrival: Arrival | None = None
        self.intended_unix_s: float | None = None

    def send_for(self, arrival: Arrival, intended_unix_s: float) -> None:
        self.arrival, self.intended_unix_s = arrival, intended_unix_s
        try:
            self.send_request()
        finally:
            self.arrival = self.intended_unix_s = None

    def _prompts(self) -> list[Prompt]:
        arrival, source = self.arrival, self.llm.source
        if (  # the logged request's own lengths (arrival replay)
            arrival is not None
            and source is not None
            and arrival.input_tokens is not None
            and arrival.output_tokens is not None
        ):
            out = max(1, arrival.output_tokens)
            return [source.synth.build(self.endpoint, max(1, arrival.input_tokens), out)]
        return super()._prompts()

    def row_context(self) -> dict[str, Any]:
        return {**super().row_context(), "intended_unix_s": self.intended_unix_s}

    def _report(self, resp: Any, obs: Any, base: dict[str, Any], *args: Any) -> dict[str, Any]:
        intended, start = base.get("intended_unix_s"), base.get("start_unix_s")
        if intended is not None and start is not None:  # signed: early sends show too
            base = {**base, "send_wait_ms": (start - intended) * 1000.0}
        return super()._report(resp, obs, base, *args)


class OpenLoopUser(LLMUser):
    """Abstract base of the open-loop dispatcher; a locustfile subclasses it (``abstract =
    False`` by default in a subclass) with the endpoint it sends to."""

    abstract = True

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        options = llm_options(environment)
        self.plan = OpenLoopPlan.from_options(options)
        self._baseline = 1 if options.baseline_requests > 0 else 0
        runner = environment.runner
        self._worker = int(getattr(runner, "worker_index", 0) or 0)
        self._idle: list[ArrivalSender] = []
        self._inflight = gevent.pool.Group()
        self._done: set[int] = set()
        self._slots: gevent.lock.BoundedSemaphore | None = None

    def dispatch(self) -> None:
        """The one task: run the open stage's share of the schedule, or wait for one."""
        lk = loadknee_of(self.environment)
        stage = lk.stage if lk is not None else None
        if self.llm.source is None:
            self.llm.ensure_source()
            if self.llm.source is None:  # no prompts: said once, and the test stops
                self.llm.stop_test()
                raise StopUser()
        if (
            not stage
            or stage.get("finished")
            or stage.get("phase") == "cooldown"
            or stage.get("stage") in self._done
            or stage.get("stage_start_unix_s") is None
        ):
            gevent.sleep(_IDLE_POLL_S)
            return
        if stage.get("kind") == "baseline":
            self.send_request()  # the single-user yardstick stays sequential
            return
        index = int(stage["stage"])
        self._done.add(index)
        workers = max(1, int(stage.get("dispatchers") or 1))
        self._run_stage(
            share(self._arrivals(index), self._worker, workers),
            float(stage["stage_start_unix_s"]),
            cap_share(self.plan.max_in_flight, self._worker, workers),
        )

    def _arrivals(self, index: int) -> list[Arrival]:
        if self.plan.replay:
            return replay_arrivals(self.plan)
        return self.plan.stage_arrivals(index - self._baseline, self.plan.stage_seconds)

    def _run_stage(self, arrivals: list[Arrival], anchor: float, cap: int) -> None:
        if self._slots is None:
            self._slots = gevent.lock.BoundedSemaphore(cap)
        slots = self._slots
        try:
            for arrival in arrivals:
                intended = anchor + arrival.offset_s
                delay = intended - time.time()
                if delay > 0:
                    gevent.sleep(delay)
                slots.acquire()  # blocks only when the cap binds: the row records the wait
                sender = self._idle.pop() if self._idle else self._new_sender()
                self._inflight.spawn(self._send, sender, arrival, intended)
            self._inflight.join()
        finally:  # stopped mid-stage: the sends in flight end as cancelled rows
            self._inflight.kill(block=True, timeout=5.0)

    def _send(self, sender: ArrivalSender, arrival: Arrival, intended: float) -> None:
        try:
            sender.send_for(arrival, intended)
        finally:
            self._idle.append(sender)
            assert self._slots is not None
            self._slots.release()

    def _new_sender(self) -> ArrivalSender:
        return ArrivalSender(
            self.environment, self.host, self.endpoint, self.request_name, self.batch_size
        )


# the one task: Locust adds every base class's tasks to a subclass's, so LLMUser's closed-loop
# ``generate`` would run beside the dispatcher (seen: rows without a planned time)
OpenLoopUser.tasks = [OpenLoopUser.dispatch]


def replay_arrivals(plan: OpenLoopPlan) -> list[Arrival]:
    """The arrival log's requests as one schedule (bad lines and unordered starts said once)."""
    from loadknee_core.traces import read_trace

    read, records = read_trace(plan.arrival_log)
    arrivals, unordered = log_arrivals(
        ((r.start_s, r.input_tokens, r.output_tokens) for r in records),
        time_scale=plan.time_scale,
    )
    if read.bad_count:
        log.warning("loadknee: arrival log %s", read.summary())
    if unordered:
        log.warning(
            "loadknee: arrival log %s: %d start(s) earlier than the line before; replayed in "
            "time order",
            read.path,
            unordered,
        )
    return arrivals
