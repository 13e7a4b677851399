"""The open-loop shape: rate stages (or one arrival-replay stage) on the stepped sweep's machinery.

:class:`OpenLoopShape` is the stepped :class:`~loadknee_locust.plugin.shape.SteppedShape` with
its own plan and user count: the :class:`~loadknee_locust.sweep.schedule.Schedule` runs one
``step`` stage per ``--llm-rates`` rate (``--llm-stage-seconds`` long, warm-up, cooldown and the
optional closed-loop baseline as in the stepped sweep), or one stage as long as the replayed
log (``--llm-arrival-log`` / ``--llm-time-scale``), so ``stages.csv``, ``requests.csv``, the
labels of the rows, the telemetry and the red line are the sweep's own. The live refinement is
off: its levels are user counts. Locust is asked for one :class:`~loadknee_locust.arrivals.
dispatcher.OpenLoopUser` per process (one per worker), never for the load itself; each stage
announcement carries the stage's start and the dispatcher count, from which every dispatcher
takes its share of the one schedule. ``target_users`` in ``stages.csv`` is 1 per stage; the
rates are in ``run.json``'s parameters (``llm_rates``), where the analysis reads them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from loadknee_locust.arrivals.plan import LEAD_S, OpenLoopPlan
from loadknee_locust.plugin.shape import SteppedShape, _is_master
from loadknee_locust.sweep.schedule import Schedule, SchedulePlan

#: seconds the replay stage holds after its last planned send (the last answers come in the
#: cooldown, which waits for every request in flight)
REPLAY_TAIL_S = 0.5


class OpenLoopShape(SteppedShape):
    """Rate stages or an arrival replay, from the ``--llm-*`` options (subclass to use)."""

    abstract = True
    open_loop = True  # the web UI's open-loop view and form check read this

    def __init__(self) -> None:
        super().__init__()
        self._planned: tuple[Any, SchedulePlan] | None = None

    def plan_from(self, options: Any) -> SchedulePlan:
        cached = self._planned
        if cached is not None and cached[0] is options:
            return cached[1]
        open_plan = OpenLoopPlan.from_options(options)
        base = SchedulePlan.from_options(replace(options, no_refine=True, stop_after_knee=-1))
        if open_plan.replay:
            from loadknee_locust.arrivals.dispatcher import replay_arrivals

            arrivals = replay_arrivals(open_plan)
            if not arrivals:
                raise ValueError(f"--llm-arrival-log {open_plan.arrival_log}: no usable request")
            length = max(arrivals[-1].offset_s, LEAD_S) + REPLAY_TAIL_S
            plan = replace(base, levels=(1,), stage_seconds=length, warmup_seconds=0.0)
        else:
            plan = replace(base, levels=(1,) * len(open_plan.rates))
        self._planned = (options, plan)
        return plan

    def dispatchers(self) -> int:
        """One dispatcher per process: the connected workers, or this one."""
        runner = self.runner
        count = int(getattr(runner, "worker_count", 0) or 0) if _is_master(runner) else 0
        return max(1, count)

    def announce_facts(self, sched: Schedule) -> dict[str, Any]:
        return {**super().announce_facts(sched), "dispatchers": self.dispatchers()}

    def tick(self) -> tuple[int, float] | None:
        step = super().tick()
        if step is None or step[0] == 0:
            return step
        run = self._run
        sched = run.schedule if run is not None else None
        if sched is not None and sched.position().kind == "baseline":
            return step  # the single-user yardstick: one user, on one worker
        n = self.dispatchers()
        return n, float(n)
