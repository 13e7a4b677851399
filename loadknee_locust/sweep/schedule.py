"""The stepped sweep as a pure state machine: stage, phase, users, and when to stop.

No locust, no clock, no I/O: the caller passes the time (unix seconds) and the completed requests,
so every rule is tested table-driven without sleeping.
:class:`~loadknee_locust.plugin.shape.SteppedShape` drives it from ``tick()``, and the recorder
asks it for the stage and phase of each row.

The plan:

1. an optional **baseline** stage (``baseline_requests`` > 0): 1 user, strictly sequential; the
   first completed request is the warm-up (phase ``warmup``), the next ``baseline_requests`` are
   measured (phase ``baseline``); the window closes at the end of the N-th measured request;
2. one **step** stage per level. Each begins with ``warmup_seconds`` of warm-up (phase
   ``warmup``), then the measured window (phase ``measure``), which closes either after
   ``stage_seconds`` in all (warm-up included) or, when ``stage_requests`` > 0, once that many
   requests *started in the measured window* have completed (the warm-up stays time based, so the
   labels of rows that arrive late from workers never change; set ``warmup_seconds`` to 0 for
   the fixed-count method, where the baseline already warmed the server up). Requests in flight
   when a count-based window closes still count as measured, so a stage holds *at least* N;
3. after every stage, ``cooldown_seconds`` with 0 users (phase ``cooldown``) so queues drain,
   counted from the tick that dropped the users (a count-based window can close seconds before
   a tick learns of it from late worker reports; the pause is never cut short by that);
4. the sweep ends after the last stage's cooldown, at the overall ``time_limit_s``, at the red
   line (checked when a stage's cooldown ends, over that stage's measured rows), or on an
   external stop;
5. **adaptive** plans (``refine`` on, or ``stop_after_knee`` ≥ 0) ask after every stage what
   comes next (:mod:`loadknee_locust.sweep.refine`): a ``refine`` stage between the last good level
   and
   the knee, the next grid level, or the end (``knee_confirmed``, or ``red_line`` for the
   analysis's red line). The judgement comes from the caller's ``decide(stage)`` (the shape runs
   the analysis in a child process): the stage is closed and written as soon as its window has
   closed and its users have stopped (after ``judge_delay_s``, for rows still on their way from
   workers), so the judgement runs *during* the cooldown; the next stage opens once both the
   cooldown and the judgement are over. A judgement that fails (``decide`` returns None) turns the
   rest of the sweep into the plain grid. Stage indexes stay in run order: a refine stage at 12
   users gets the index after the 16-user stage that revealed the knee;
6. **stages long enough, not longer** (``--llm-stage-seconds auto`` or ``--llm-stage-requests
   auto``): the measured window holds until its output-throughput interval
   (:func:`loadknee_core.confidence.throughput_interval`, the computation the analysis uses)
   is
   within ±``precision_pct``, at least ``min_measure_s`` and at most ``max_measure_s`` (stop
   reasons ``precise`` and ``imprecise``). It is checked at each ``advance`` over the requests
   completed so far, on a window that ends one median request span before the latest completion
   (requests still in flight would leave the last batch window short and the interval too wide).
   A timed window closes at that ``now``; a counted one at its latest completion, as counted
   windows do;
7. a count-based stage (numeric or ``auto``) never measures fewer than
   ``min_requests_per_user`` (:data:`MIN_REQUESTS_PER_USER`, 5) requests per user: batch means
   need at least 5 windows each one request long, so a window of fewer request lifetimes can
   carry no interval at all, and with one or two requests per user the start and stop edges are
   most of the window (the issue: 32 requests at 32 users). The fixed-count method's 40 requests
   at 8 users is exactly 5 per user.

A row's stage and phase are decided by its *start* time against the boundaries: a request that
started in stage s's measured window belongs to stage s, phase ``measure``, even if it ends in the
cooldown. Within a stage the timed boundaries are the planned ones (start + warm-up, + window), so
windows have exactly the configured length even when a tick comes late; a stage starts when the
schedule saw the previous cooldown end (the ``now`` of that call: when its users are released). A
count-based window closes at the latest end among the requests that filled it, so no row already
labelled can fall on the wrong side of a boundary set later.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from loadknee_core.confidence import throughput_interval
from loadknee_core.contract import (
    INTERVAL_TARGET_PCT,
    RED_LINE_ERROR_PCT,
    Phase,
    StageKind,
    StopReason,
)
from loadknee_core.red_line import crosses_red_line  # stdlib only: the analysis's red line
from loadknee_locust.sweep import phase_defaults
from loadknee_locust.sweep.refine import LiveVerdict, next_step

#: what ``decide(stage)`` returns while the judgement of ``stage`` is still running
PENDING = "pending"
#: a counted window never holds fewer requests than this per user (module docstring, rule 7)
MIN_REQUESTS_PER_USER = 5
#: the value of ``--llm-stage-seconds`` / ``--llm-stage-requests`` for a stage held until precise
AUTO = "auto"

if TYPE_CHECKING:  # the options live with the Locust wiring, above this module
    from loadknee_locust.plugin.options import LlmOptions


def parse_levels(text: str) -> tuple[int, ...]:
    """``"1,2,4,8"`` → ``(1, 2, 4, 8)``; every level a positive integer."""
    try:
        levels = tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise ValueError(f"--llm-levels must be comma-separated integers, got {text!r}") from None
    if not levels or any(level < 1 for level in levels):
        raise ValueError(f"--llm-levels needs at least one level, each >= 1, got {text!r}")
    return levels


def parse_stage_length(text: str | float, flag: str) -> float | None:
    """``"120"`` → 120.0, ``"auto"`` → None (held until precise); negative or junk: ValueError."""
    raw = str(text).strip().lower()
    if raw == AUTO:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{flag} must be a number or 'auto', got {text!r}") from None
    if value < 0 or value != value:
        raise ValueError(f"{flag} must be >= 0 or 'auto', got {text!r}")
    return value


@dataclass(frozen=True)
class StagePlan:
    """One planned stage: how many users, how its warm-up and measured window end."""

    index: int
    kind: StageKind
    users: int
    warmup_requests: int  # > 0: warm-up = the first N completed requests (baseline)
    warmup_seconds: float  # used when warmup_requests == 0
    measure_requests: int  # > 0: the window closes after N completed requests started in it
    measure_seconds: float  # used when measure_requests == 0
    auto: bool = False  # held until the throughput interval is precise (rule 6)


def stage_label(stages: Sequence[StagePlan], index: int) -> str:
    """How progress lines name stage ``index``: 'baseline', 'stage 2/6' for a grid level,
    'refine stage 1' for a level the sweep added between two grid levels.

    A refine stage used to read 'stage 7' after 'stage 6/6', which looked like a grid that had
    grown; its count is of refine stages, since how many there will be is decided as they end.
    """
    stage = stages[index]
    if stage.kind == "baseline":
        return "baseline"
    same_kind = [i for i, s in enumerate(stages) if s.kind == stage.kind]
    position = same_kind.index(index) + 1
    if stage.kind == "step":
        return f"stage {position}/{len(same_kind)}"
    return f"refine stage {position}"


@dataclass(frozen=True)
class SchedulePlan:
    """The sweep's parameters (see the module docstring for what each one means)."""

    levels: tuple[int, ...]
    stage_seconds: float
    warmup_seconds: float
    cooldown_seconds: float
    baseline_requests: int
    stage_requests: int = 0  # 0 = timed stages
    time_limit_s: float = 0.0  # 0 = none
    refine: bool = False  # refine between the last good level and the knee (options: on)
    refine_max_stages: int = 4  # at most this many refine stages per run
    refine_target_pct: float = 10.0  # refine until the capacity is known within this % of L
    stop_after_knee: int = -1  # stop once this many levels lie above the knee (< 0: never)
    judge_delay_s: float = 0.0  # wait after the window closes before judging (worker rows)
    auto: Literal["off", "seconds", "requests"] = "off"  # stage length "auto" (rule 6)
    precision_pct: float = INTERVAL_TARGET_PCT  # auto: the throughput interval's half-width target
    min_measure_s: float = 10.0  # auto: the shortest measured window
    max_measure_s: float = 300.0  # auto: the longest measured window
    min_requests_per_user: int = MIN_REQUESTS_PER_USER  # counted windows (rule 7)
    contiguous: bool = False  # each stage opens where the one before closed (curve replay)

    @property
    def adaptive(self) -> bool:
        """True when the next stage depends on the judgement of the finished ones."""
        return self.refine or self.stop_after_knee >= 0

    def __post_init__(self) -> None:
        if not self.levels or any(level < 1 for level in self.levels):
            raise ValueError("levels must be one or more integers >= 1")
        if min(self.stage_seconds, self.warmup_seconds, self.cooldown_seconds) < 0:
            raise ValueError("stage, warm-up and cooldown seconds must be >= 0")
        if self.stage_requests < 0 or self.baseline_requests < 0 or self.time_limit_s < 0:
            raise ValueError("request counts and the time limit must be >= 0")
        if self.refine_max_stages < 0 or self.judge_delay_s < 0:
            raise ValueError("--llm-refine-max-stages must be >= 0")
        if not self.refine_target_pct >= 0:
            raise ValueError("--llm-refine-target-pct must be >= 0")
        if self.auto != "off" and not 0 < self.min_measure_s <= self.max_measure_s:
            raise ValueError(
                "--llm-stage-min-seconds must be > 0 and <= --llm-stage-max-seconds "
                f"(got {self.min_measure_s:g} and {self.max_measure_s:g})"
            )
        if self.auto != "off" and not self.precision_pct > 0:
            raise ValueError("--llm-stage-precision-pct must be > 0")
        if self.min_requests_per_user < 1:
            raise ValueError("a counted stage needs at least 1 request per user")
        timed = self.stage_requests == 0 and self.auto == "off"
        if timed and self.stage_seconds <= self.warmup_seconds:
            raise ValueError(
                f"--llm-stage-seconds ({self.stage_seconds:g}) must exceed --llm-warmup-seconds "
                f"({self.warmup_seconds:g}): the stage would have no measured window; shorten "
                "the warm-up or lengthen the stage"
            )

    @classmethod
    def from_options(cls, options: LlmOptions) -> SchedulePlan:
        """From the ``--llm-*`` options (``time_limit`` already holds Locust's ``--run-time``)."""
        seconds = parse_stage_length(options.stage_seconds, "--llm-stage-seconds")
        requests = parse_stage_length(options.stage_requests, "--llm-stage-requests")
        if requests is not None and requests != int(requests):
            raise ValueError(f"--llm-stage-requests must be whole or 'auto', got {requests:g}")
        auto: Literal["off", "seconds", "requests"] = "off"  # a request count wins, as before
        if requests is None:
            auto = "requests"
        elif seconds is None and not requests:
            auto = "seconds"
        timed_s = seconds if auto == "off" and not requests else None  # a planned length
        warmup = phase_defaults.parse_phase_seconds(options.warmup_seconds, "--llm-warmup-seconds")
        cooldown = phase_defaults.parse_phase_seconds(
            options.cooldown_seconds, "--llm-cooldown-seconds"
        )
        return options.part(
            cls,
            levels=parse_levels(options.levels),
            stage_seconds=seconds or 0.0,
            stage_requests=int(requests or 0),
            auto=auto,
            precision_pct=options.stage_precision_pct,
            min_measure_s=options.stage_min_seconds,
            max_measure_s=options.stage_max_seconds,
            warmup_seconds=phase_defaults.warmup_seconds(warmup, timed_s),
            cooldown_seconds=phase_defaults.cooldown_seconds(cooldown, timed_s),
            time_limit_s=options.time_limit,
            refine=not options.no_refine,
        )

    def stages(self) -> tuple[StagePlan, ...]:
        plans: list[StagePlan] = []
        if self.baseline_requests > 0:
            plans.append(StagePlan(0, "baseline", 1, 1, 0.0, self.baseline_requests, 0.0))
        for level in self.levels:
            plans.append(self.level_stage(len(plans), "step", level))
        return tuple(plans)

    def level_stage(self, index: int, kind: StageKind, users: int) -> StagePlan:
        """The plan of one grid (``step``) or ``refine`` stage: both are timed alike.

        A counted window holds at least ``min_requests_per_user`` × users (rule 7); an ``auto``
        one has no planned length (rule 6)."""
        auto = self.auto != "off"
        counted = self.auto == "requests" or (self.auto == "off" and self.stage_requests > 0)
        requests = max(self.stage_requests, self.min_requests_per_user * users) if counted else 0
        measure_s = 0.0 if counted or auto else self.stage_seconds - self.warmup_seconds
        return StagePlan(index, kind, users, 0, self.warmup_seconds, requests, measure_s, auto)


@dataclass(frozen=True)
class StageRecord:
    """A finished stage, as a fact for ``stages.csv`` (unix seconds)."""

    stage: int
    kind: StageKind
    target_users: int
    start_unix_s: float
    warmup_end_unix_s: float
    measure_end_unix_s: float
    end_unix_s: float
    stop_reason: StopReason

    def as_row(self, batch_size: int | None = None) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "kind": self.kind,
            "target_users": self.target_users,
            "batch_size": batch_size,
            "start_unix_s": self.start_unix_s,
            "warmup_end_unix_s": self.warmup_end_unix_s,
            "measure_end_unix_s": self.measure_end_unix_s,
            "end_unix_s": self.end_unix_s,
            "stop_reason": self.stop_reason,
        }


@dataclass(frozen=True)
class Position:
    """Where the sweep is: the answer to "what should the shape do now"."""

    stage: int
    kind: StageKind
    phase: Phase
    users: int
    finished: bool
    stop_reason: StopReason | None  # why the sweep ended (None while running)


@dataclass
class _OpenStage:
    """Boundaries of the stage in progress. Timed ones are set when the stage opens (they are
    planned facts, so rows are labelled right before a tick reaches them); count-based ones stay
    None until the requests that fill them have completed."""

    plan: StagePlan
    start: float
    warmup_end: float | None = None
    measure_end: float | None = None
    stop_reason: StopReason | None = None
    warmup_done: int = 0
    warmup_last_end: float = -math.inf
    measured_done: int = 0
    measured_last_end: float = -math.inf
    cooldown_from: float | None = None  # when a tick first saw the window closed (users → 0)
    #: auto stages: (generation start, end, completion tokens) of each ok request since start
    served: list[tuple[float, float, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        plan = self.plan
        if not plan.warmup_requests:
            self.warmup_end = self.start + plan.warmup_seconds
            if not plan.measure_requests and not plan.auto:
                self.measure_end = self.warmup_end + plan.measure_seconds
                self.stop_reason = "duration"

    def phase_of(self, t: float) -> Phase:
        """The phase at time ``t`` (a request's start, or now)."""
        if self.warmup_end is None or t < self.warmup_end:
            return "warmup"
        if self.measure_end is None or t < self.measure_end:
            return "baseline" if self.plan.kind == "baseline" else "measure"
        return "cooldown"

    def record(self, end: float) -> StageRecord:
        assert self.warmup_end is not None and self.measure_end is not None
        assert self.stop_reason is not None
        return StageRecord(
            self.plan.index,
            self.plan.kind,
            self.plan.users,
            self.start,
            self.warmup_end,
            self.measure_end,
            end,
            self.stop_reason,
        )


class Schedule:
    """The sweep's state; every method takes the time from its caller.

    ``advance(now)`` moves to the phase (and stage) of ``now`` and returns the :class:`Position`;
    ``observe(start, end)`` counts one completed request (count-based windows);
    ``locate(start)`` gives a row's stage and phase; ``stop(now, reason)`` ends the sweep;
    ``pop_closed()`` hands over each finished stage's :class:`StageRecord` once.
    ``stages`` lists the stages run so far followed by the grid stages still planned; refine
    stages are inserted and an early stop drops the rest, so it is final once ``finished``.
    """

    def __init__(self, plan: SchedulePlan, start_unix_s: float) -> None:
        self.plan = plan
        self.stages: list[StagePlan] = list(plan.stages())
        self.start_unix_s = start_unix_s
        self._closed: list[StageRecord] = []
        self._unpopped: list[StageRecord] = []
        self._open: _OpenStage | None = _OpenStage(self.stages[0], start_unix_s)
        self._pending: int | None = None  # closed stage awaiting its judgement (adaptive plans)
        self._resume_at = start_unix_s  # the pending stage's cooldown end
        self._fallback = False  # a judgement failed: the plain grid from then on
        self._finished = False
        self._stop_reason: StopReason | None = None
        self._now = start_unix_s
        self.verdicts: dict[int, LiveVerdict | None] = {}  # judgement after each stage
        self._answers: dict[int, LiveVerdict | None] = {}  # judged, awaiting the cooldown's end

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def fell_back(self) -> bool:
        """True when a live judgement failed and the sweep went on as the plain grid."""
        return self._fallback

    @property
    def closed(self) -> tuple[StageRecord, ...]:
        return tuple(self._closed)

    def stage_start(self) -> float | None:
        """When the stage in progress began (unix s); None between stages' judgements."""
        return None if self._open is None else self._open.start

    def position(self) -> Position:
        """The position at the last ``advance`` (or ``stop``), without moving time."""
        op = self._open
        if op is None:
            last = self._closed[-1]
            done = self._finished
            return Position(last.stage, last.kind, "cooldown", 0, done, self._stop_reason)
        phase = op.phase_of(self._now)
        users = 0 if phase == "cooldown" else op.plan.users
        return Position(op.plan.index, op.plan.kind, phase, users, False, None)

    def advance(
        self,
        now: float,
        red_line: Callable[[int], bool] | None = None,
        *,
        users_running: int = 0,
        decide: Callable[[int], LiveVerdict | str | None] | None = None,
    ) -> Position:
        """Apply every boundary reached by ``now``; ``red_line(stage)`` is asked as a stage ends.

        ``users_running`` is the runner's user count: a cooldown does not end while users of the
        stage before are still finishing their in-flight requests. Locust counts a stopping user
        towards the next target, so starting the next level early would spawn too few users and
        leave the stage short once the old ones exit.

        ``decide(stage)`` (adaptive plans) returns the judgement after a closed stage, or
        :data:`PENDING` while it runs, or None when it failed; no ``decide`` counts as failed.
        It is first asked in the call that closed the stage, at the start of the cooldown (the
        caller writes the closed stage, ``pop_closed``, before its judgement reads the run
        directory), and polled until it answers; the answer is kept until the cooldown is over.
        """
        self._now = max(self._now, now)
        limit = self.plan.time_limit_s
        if not self._finished and limit and now >= self.start_unix_s + limit:
            self.stop(now, "time_limit")
        while not self._finished:
            pending = self._pending
            if pending is not None:
                if pending not in self._answers:
                    got = decide(pending) if decide is not None else None
                    if got == PENDING:
                        break
                    self._answers[pending] = got if isinstance(got, LiveVerdict) else None
                if now < self._resume_at or users_running > 0:
                    # judged; the cooldown still runs, or the last level's users still finish
                    # their requests (the stage closed for the judgement before they stopped)
                    break
                verdict = self._answers.pop(pending)
                self.verdicts[pending] = verdict
                self._fallback = self._fallback or verdict is None
                self._pending = None
                self._next_after(verdict, now)
                continue
            op = self._open
            assert op is not None
            if op.plan.auto and op.measure_end is None:
                self._hold_until_precise(op, now)
            if op.measure_end is None or now < op.measure_end:
                break
            if op.cooldown_from is None:
                op.cooldown_from = now
            cooldown_end = op.cooldown_from + self.plan.cooldown_seconds
            judge_at = op.cooldown_from + min(self.plan.judge_delay_s, self.plan.cooldown_seconds)
            if users_running > 0 or now < (judge_at if self.plan.adaptive else cooldown_end):
                break
            crossed = red_line is not None and red_line(op.plan.index)
            if crossed:
                op.stop_reason = "red_line"
            self._close(op, op.measure_end if self.plan.contiguous else max(now, cooldown_end))
            self._open = None
            if crossed:
                self._finish("red_line")
            elif self.plan.adaptive:
                self._pending = op.plan.index
                self._resume_at = max(now, cooldown_end)
            elif op.plan.index + 1 >= len(self.stages):
                self._finish(op.stop_reason)
            else:
                opens = op.measure_end if self.plan.contiguous else now
                self._open = _OpenStage(self.stages[op.plan.index + 1], opens)
        return self.position()

    def _hold_until_precise(self, op: _OpenStage, now: float) -> None:
        """Close an ``auto`` window once precise, or at its maximum (module docstring, rule 6)."""
        plan = self.plan
        if op.warmup_end is None or now < op.warmup_end:
            return
        held = now - op.warmup_end
        counted = op.plan.measure_requests > 0
        end = op.measured_last_end if counted else now
        if held >= plan.max_measure_s:
            if not counted or op.measured_done > 0:
                op.measure_end, op.stop_reason = max(end, op.warmup_end), "imprecise"
            return
        if held < plan.min_measure_s or op.measured_done < op.plan.measure_requests:
            return
        hw = stage_precision(op.served, op.warmup_end, now)
        if hw is not None and hw <= plan.precision_pct:
            op.measure_end, op.stop_reason = max(end, op.warmup_end), "precise"

    def _next_after(self, verdict: LiveVerdict | None, now: float) -> None:
        """Open the stage that :func:`~loadknee_locust.sweep.refine.next_step` picks, or finish."""
        last = self._closed[-1]
        nxt = last.stage + 1
        levels = [rec.target_users for rec in self._closed if rec.kind != "baseline"]
        grid_left = [p.users for p in self.stages[nxt:] if p.kind == "step"]
        refined = sum(1 for rec in self._closed if rec.kind == "refine")
        refine_on = self.plan.refine and not self._fallback
        step = next_step(
            verdict,
            tested=levels,
            grid_left=grid_left,
            refine_left=self.plan.refine_max_stages - refined if refine_on else 0,
            stop_after_knee=-1 if self._fallback else self.plan.stop_after_knee,
            target_pct=self.plan.refine_target_pct,
            refined=refined,
        )
        if step.action == "stop":
            del self.stages[nxt:]
            if step.reason in ("knee_confirmed", "red_line"):
                self._finish(step.reason)
            else:
                self._finish(last.stop_reason)
            return
        if step.action == "refine":
            chosen = self.plan.level_stage(nxt, "refine", step.users)
            rest = [p for p in self.stages[nxt:]]
        else:
            rest = [p for p in self.stages[nxt:] if p.users not in levels]
            chosen = rest.pop(0)
        self.stages[nxt:] = [replace(p, index=i) for i, p in enumerate([chosen, *rest], start=nxt)]
        self._open = _OpenStage(self.stages[nxt], now)

    def observe(
        self, start: float, end: float, *, tokens: float | None = None, ttft_s: float = 0.0
    ) -> None:
        """Count one completed request (any outcome) for the current stage's count-based windows.

        ``tokens`` (completion tokens of a served request; None for a failed one) and ``ttft_s``
        feed an ``auto`` stage's interval: its tokens are spread over start + TTFT to end, as
        the analysis spreads them."""
        op = self._open
        if op is None or start < op.start:
            return
        if op.plan.auto and tokens is not None:
            op.served.append((min(start + ttft_s, end), end, tokens))
        phase = op.phase_of(start)
        if phase == "warmup" and op.plan.warmup_requests and op.warmup_end is None:
            op.warmup_done += 1
            op.warmup_last_end = max(op.warmup_last_end, end)
            if op.warmup_done >= op.plan.warmup_requests:
                op.warmup_end = op.warmup_last_end
        elif phase in ("measure", "baseline") and op.plan.measure_requests:
            op.measured_done += 1
            op.measured_last_end = max(op.measured_last_end, end)
            full = op.measured_done >= op.plan.measure_requests
            if full and op.measure_end is None and not op.plan.auto:
                op.measure_end, op.stop_reason = op.measured_last_end, "request_count"

    def stop(self, now: float, reason: StopReason) -> None:
        """End the sweep now (time limit, user stop); the current stage is closed with ``reason``
        unless its measured window had already closed, which keeps its own reason."""
        if self._finished:
            return
        self._now = max(self._now, now)
        op = self._open
        if op is None:  # between stages, awaiting a judgement
            self._pending = None
            self._finish(reason)
            return
        if op.warmup_end is None or now < op.warmup_end:
            op.warmup_end = now
        if op.measure_end is None or now < op.measure_end:
            op.measure_end, op.stop_reason = max(now, op.warmup_end), reason
        self._close(op, max(now, op.measure_end))
        self._finish(reason)

    def locate(self, start: float) -> tuple[int, Phase]:
        """Stage and phase of a request by its start time (before the first stage: its warm-up)."""
        op = self._open
        if op is not None and start >= op.start:
            return op.plan.index, op.phase_of(start)
        for rec in reversed(self._closed):
            if start >= rec.start_unix_s:
                if start < rec.warmup_end_unix_s:
                    return rec.stage, "warmup"
                if start < rec.measure_end_unix_s:
                    return rec.stage, "baseline" if rec.kind == "baseline" else "measure"
                return rec.stage, "cooldown"
        return self.stages[0].index, "warmup"

    def pop_closed(self) -> list[StageRecord]:
        out, self._unpopped = self._unpopped, []
        return out

    def stage_seconds_left(self, now: float) -> float | None:
        """Planned seconds left in the current stage, its cooldown included (None: count-based).

        Counted from when the stage opened: an adaptive sweep opens a stage when the judgement
        of the one before came back, which can be after that stage's planned cooldown end.
        """
        if self._finished:
            return 0.0
        op = self._open
        if op is None:  # closed: the cooldown (and the judgement) before the next stage
            return max(0.0, self._resume_at - now)
        plan = op.plan
        if plan.warmup_requests or plan.measure_requests:
            return None
        end = op.start + plan.warmup_seconds + plan.measure_seconds + self.plan.cooldown_seconds
        return max(0.0, end - now)

    def counted_stage_eta(self, now: float) -> float | None:
        """Seconds a count-based stage still needs at the rate its measured requests came so far
        (its cooldown included); None before two of them, or for any other kind of stage."""
        op = self._open
        if self._finished or op is None or op.plan.auto or not op.plan.measure_requests:
            return None
        if op.warmup_end is None or op.measure_end is not None or op.measured_done < 2:
            return None
        elapsed = now - op.warmup_end
        if elapsed <= 0:
            return None
        left = max(0, op.plan.measure_requests - op.measured_done)
        return left * elapsed / op.measured_done + self.plan.cooldown_seconds

    def seconds_left(self, now: float) -> float | None:
        """Planned seconds until the sweep ends; None when a count-based window makes it unknown."""
        op = self._open
        if self._finished:
            return 0.0
        limit_left = (
            self.start_unix_s + self.plan.time_limit_s - now if self.plan.time_limit_s else None
        )
        left: float | None = 0.0
        first = op.plan.index if op is not None else self._closed[-1].stage + 1
        for plan in self.stages[first:]:
            if plan.warmup_requests or plan.measure_requests or plan.auto:
                left = None
                break
            assert left is not None
            left += plan.warmup_seconds + plan.measure_seconds + self.plan.cooldown_seconds
        if left is not None:
            left -= now - op.start if op is not None else min(0.0, now - self._resume_at)
        candidates = [x for x in (left, limit_left) if x is not None]
        return max(0.0, min(candidates)) if candidates else None

    def saving(self) -> SweepSaving:
        """What the adaptive sweep ran against the plain grid (see :class:`SweepSaving`)."""
        levels = [r for r in self._closed if r.kind != "baseline"]
        tested = {r.target_users for r in levels}
        skipped = tuple(u for u in self.plan.levels if u not in tested)
        durations = [r.end_unix_s - r.start_unix_s for r in levels]
        mean = sum(durations) / len(durations) if durations else 0.0
        refined = sum(1 for r in levels if r.kind == "refine")
        return SweepSaving(skipped, refined, mean, mean * (len(skipped) - refined))

    def _close(self, op: _OpenStage, end: float) -> None:
        rec = op.record(end)
        self._closed.append(rec)
        self._unpopped.append(rec)

    def _finish(self, reason: StopReason | None) -> None:
        self._open = None
        self._finished = True
        self._stop_reason = reason


def stage_precision(
    served: list[tuple[float, float, float]], window_start: float, now: float
) -> float | None:
    """Half-width (%) of the output-throughput interval over ``[window_start, cut]``, where
    ``cut`` is one median generation span before the latest completion: by then nearly every
    request that overlaps the window has completed and been counted (rule 6). None when the
    window holds too few request spans for an interval."""
    done = [r for r in served if r[1] <= now]
    if not done:
        return None
    span = statistics.median(end - start for start, end, _ in done)
    cut = min(now, max(end for _, end, _ in done)) - span
    if not cut > window_start:
        return None
    interval = throughput_interval(
        [r[1] for r in done],
        [r[2] for r in done],
        window_start,
        cut,
        starts_s=[r[0] for r in done],
    )
    return None if interval is None else interval.half_width_pct


@dataclass(frozen=True)
class SweepSaving:
    """Grid levels an early stop skipped, refine stages added, and the time that nets out to.

    ``saved_s`` is an estimate: each level (skipped or added) is priced at the mean duration of
    the levels run (users released to cooldown over), which holds for timed stages and is the
    best guess for count-based ones. Negative when refinement cost more than the stop saved."""

    skipped_levels: tuple[int, ...]
    refine_stages: int
    level_seconds: float
    saved_s: float


@dataclass(frozen=True)
class RedLine:
    """Early-stop thresholds over one stage's measured rows: an error share above ``error_pct``
    (:data:`~loadknee_core.contract.RED_LINE_ERROR_PCT`'s meaning; 100 = off) or a P95 e2e
    latency above ``p95_ms`` (0 = off)."""

    error_pct: float = RED_LINE_ERROR_PCT
    p95_ms: float = 0.0

    @classmethod
    def from_options(cls, options: LlmOptions) -> RedLine:
        return cls(options.red_line_error_pct, options.red_line_p95_ms)

    @property
    def enabled(self) -> bool:
        return self.error_pct < 100 or self.p95_ms > 0

    def crossed(self, *, requests: int, errors: int, p95_ms: float | None) -> bool:
        """True when the error share or the P95 e2e latency passed its threshold; the error
        share by :func:`loadknee_core.red_line.crosses_red_line`, the analysis's own rule."""
        if requests <= 0:
            return False
        if crosses_red_line(requests=requests, errors=errors, limit_pct=self.error_pct):
            return True
        return self.p95_ms > 0 and p95_ms is not None and p95_ms > self.p95_ms
