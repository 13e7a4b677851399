"""Curve replay inside the stepped shape: the log's windows as the sweep's stages.

``--llm-replay-curve LOG`` turns :class:`~loadknee_locust.plugin.shape.SteppedShape` (and so
every locustfile that uses ``KneeShape``) into a closed-loop replay of the log's in-flight curve:

* the schedule's stages are the plan's windows (:mod:`loadknee_locust.curve.plan`), back to
  back after a short lead-in (:data:`LEAD_IN_S`, the first window's warm-up): no baseline,
  no other warm-up, no cooldown, no refinement (``contiguous``: each window opens
  where the one before closed, so the replay clock never drifts by a late tick). Each window's
  rows are its stage's ``measure`` rows and its ``target_users`` the curve's mean there, so
  ``loadknee analyze`` reads the replay like any sweep: record table, knee, verdicts, telemetry;
* at each tick the shape asks for the curve's users at that replay second
  (:meth:`CurveReplay.users`), not the stage's ``target_users``;
* ``run.json`` holds the plan (``curve``: time scale, window length, scales, each window's log
  span and users; the log's sha256, never its text), which ``loadknee trace LOG --against RUN``
  reads to name the first scale and the minute of the log that broke.

With several scales, each finished scale is judged (the live judge, while the next scale runs):
a knee or red line stops the replay there (stop reason ``knee_confirmed``), so the scales past
the first that breaks are not run. The red line (``--llm-red-line-*``), ``--llm-time-limit`` and
Ctrl-C stop a replay as they stop a sweep.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadknee_core.traces import read_trace
from loadknee_locust.curve.checks import plan_params
from loadknee_locust.curve.live import InflightTrack
from loadknee_locust.curve.plan import CurvePlan, LengthIndex, build_plan
from loadknee_locust.curve.source import CurveSource
from loadknee_locust.sweep.schedule import SchedulePlan, StagePlan

if TYPE_CHECKING:
    from loadknee_locust.plugin.options import LlmOptions


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class LoadedCurve:
    plan: CurvePlan
    index: LengthIndex
    info: dict[str, Any]  # for run.json: the plan, the log's name, sha256 and read report


#: before the replay clock starts, the first window holds its first second's users this long as
#: its warm-up (rows phase ``warmup``): users connect and workers calibrate their prompts, which
#: would otherwise make the first window's in-flight count fall short of the log's
LEAD_IN_S = 3.0

_CACHE: dict[tuple[Any, ...], LoadedCurve] = {}


def load_curve(options: LlmOptions) -> LoadedCurve:
    """Read the log once per process and options (the shape and the users share it)."""
    path = options.replay_curve
    params = plan_params(options)
    stat = os.stat(path)
    key = (os.path.abspath(path), stat.st_mtime_ns, stat.st_size, params)
    found = _CACHE.get(key)
    if found is not None:
        return found
    read, records = read_trace(path)
    plan, index = build_plan(records, params)
    info = {
        "log": os.path.basename(path),
        "log_sha256": _sha256(path),
        "log_format": read.format,
        "log_read": read.summary(),
        **plan.info(),
    }
    loaded = LoadedCurve(plan, index, info)
    _CACHE.clear()  # one log per process at a time
    _CACHE[key] = loaded
    return loaded


@dataclass(frozen=True)
class CurveSchedulePlan(SchedulePlan):
    """One timed stage per window, each as long as its window (the last may be shorter)."""

    windows: tuple[tuple[int, float], ...] = ()  # (target users, seconds) per window
    lead_in_s: float = 0.0  # the first window's warm-up: users connect, prompts calibrate

    def stages(self) -> tuple[StagePlan, ...]:
        return tuple(
            StagePlan(i, "step", users, 0, self.lead_in_s if i == 0 else 0.0, 0, seconds)
            for i, (users, seconds) in enumerate(self.windows)
        )


def schedule_plan(
    plan: CurvePlan, time_limit_s: float = 0.0, lead_in_s: float = LEAD_IN_S
) -> CurveSchedulePlan:
    return CurveSchedulePlan(
        levels=tuple(w.target_users for w in plan.windows),
        stage_seconds=plan.window_s,
        warmup_seconds=0.0,
        cooldown_seconds=0.0,
        baseline_requests=0,
        time_limit_s=time_limit_s,
        contiguous=True,
        windows=tuple((w.target_users, float(w.bins)) for w in plan.windows),
        lead_in_s=lead_in_s,
    )


class CurveReplay:
    """What the shape needs from a replay: its schedule plan and the users at each tick."""

    def __init__(self, options: LlmOptions) -> None:
        self.options = options
        self.loaded = load_curve(options)
        self.plan = self.loaded.plan
        self.schedule_plan = schedule_plan(self.plan, options.time_limit)

    def users(self, stage: int, stage_start_unix_s: float, now: float) -> int:
        return self.plan.users_at(stage, now - stage_start_unix_s)

    def track(self, start_unix_s: float) -> InflightTrack:
        """The live view's log curve and measured in flight, from the replay's first second."""
        return InflightTrack(self.plan, start_unix_s + self.schedule_plan.lead_in_s)

    def scales_done(self, start_unix_s: float, now: float) -> int:
        """How many scales' windows have all ended by ``now``."""
        elapsed = now - start_unix_s - self.schedule_plan.lead_in_s
        return min(len(self.plan.scales), max(0, int(elapsed // self.plan.pass_s)))

    def stage_start(self, start_unix_s: float, stage: int) -> float:
        """When window ``stage``'s replay starts: the replay's start, the lead-in and the
        windows before it (during the lead-in the first second's users hold)."""
        lead = self.schedule_plan.lead_in_s
        return start_unix_s + lead + sum(w.bins for w in self.plan.windows[:stage])


def _announced(environment: Any) -> tuple[int, float] | None:
    """The stage the master announced last and when (on the master, the shape's own call)."""
    from loadknee_locust.plugin.wiring import loadknee_of

    lk = loadknee_of(environment)
    stage = lk.stage if lk is not None else None
    if not stage or stage.get("finished") or "unix_s" not in stage:
        return None
    return int(stage["stage"]), float(stage["unix_s"])


def build_curve_source(options: LlmOptions, environment: Any) -> CurveSource:
    """The prompt source of one process: its share of the log's records (one worker's)."""
    from loadknee_locust.prompts.synth import PromptSynth

    loaded = load_curve(options)
    runner = getattr(environment, "runner", None)
    parsed = getattr(environment, "parsed_options", None)
    worker = int(getattr(runner, "worker_index", 0) or 0)
    workers = 1
    if hasattr(runner, "worker_index"):  # a worker: the master's --expect-workers came along
        workers = max(int(getattr(parsed, "expect_workers", 1) or 1), worker + 1)
    synth = PromptSynth(
        prefix_tokens=options.shared_prefix_tokens, unique_tag=not options.no_unique_tag
    )
    return CurveSource(
        synth,
        loaded.plan,
        loaded.index,
        clock=lambda: _announced(environment),
        input_tokens=options.input_tokens,
        output_tokens=options.output_tokens,
        worker=worker,
        workers=workers,
        info={"log": loaded.info["log"], "log_sha256": loaded.info["log_sha256"]},
    )
