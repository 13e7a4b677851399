"""The asyncio engine: paces :class:`.batching.Scheduler` steps in real time and delivers tokens.

One task (:meth:`Engine.run`) loops: take a step from the scheduler, sleep until the step's end
(deadlines are kept on a steady grid, so timer overshoot does not accumulate; a loop more than
``MAX_LAG_S`` behind starts afresh instead of bursting), then hand every emitted token to its
request. A request is a small mailbox the HTTP handler drains (:meth:`Request.next_events`), so each
token can be written the moment it exists.

Failure paths: :class:`QueueFull` when more than ``max_waiting`` sequences would wait beyond the
slots;
:class:`Unavailable` while the engine restarts after a crash. A crash (dynamic memory past the
GPU total with ``oom_crash``, or :meth:`Engine.request_crash`) cuts every in-flight request (their
mailboxes report ``cut``), then the engine is down for ``restart_s``.

Determinism: sequence ids follow arrival order; the EOS point and the token text of sequence ``i``
depend only on ``(seed, i)``.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import Protocol

from loadknee_locust.sim.batching import FinishReason, Scheduler, Sequence, StepResult
from loadknee_locust.sim.params import SimParams
from loadknee_locust.sim.telemetry import BusyWindow, would_oom
from loadknee_locust.sim.tokenizer import VOCAB

MAX_LAG_S = 0.05
LATE_S = 0.005


class QueueFull(Exception):
    """More than ``max_waiting`` sequences would wait beyond the slots: reject (429/503)."""


class Unavailable(Exception):
    """The engine is down (cold restart after a crash): 503."""


@dataclass(frozen=True)
class GenerationSpec:
    """What one HTTP request asks the engine for: one sequence per prompt."""

    prompt_tokens: tuple[int, ...]
    max_tokens: int
    min_tokens: int = 0
    ignore_eos: bool = False
    #: each prompt's block hashes (:func:`.prefixcache.block_hashes`); empty without the cache
    prompt_blocks: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class TokenEvent:
    index: int  # choice index
    text: str
    finish_reason: FinishReason | None  # set on a sequence's last token


class Observer(Protocol):
    """Receives per-sequence latencies (the Prometheus histograms implement it)."""

    def queue_time(self, seconds: float) -> None: ...
    def ttft(self, seconds: float) -> None: ...
    def itl(self, seconds: float) -> None: ...
    def e2e(self, seconds: float, finish_reason: FinishReason) -> None: ...


@dataclass
class LoopHealth:
    """How late the engine loop wakes after each step: the simulator's own CPU headroom.

    A step is *late* when the loop wakes more than ``LATE_S`` after its deadline; many late steps
    mean the host, not the model, is setting the pace.
    """

    steps: int = 0
    late_steps: int = 0
    lag_sum_s: float = 0.0
    lag_max_s: float = 0.0

    def record(self, lag_s: float) -> None:
        self.steps += 1
        self.lag_sum_s += max(0.0, lag_s)
        self.lag_max_s = max(self.lag_max_s, lag_s)
        if lag_s > LATE_S:
            self.late_steps += 1

    def as_dict(self) -> dict[str, float]:
        return {
            "steps": self.steps,
            "late_steps": self.late_steps,
            "lag_mean_ms": 1000 * self.lag_sum_s / self.steps if self.steps else 0.0,
            "lag_max_ms": 1000 * self.lag_max_s,
        }


class Request:
    """One HTTP request's sequences and the mailbox its handler drains."""

    def __init__(self, spec: GenerationSpec, seqs: list[Sequence], arrival_mono: float) -> None:
        self.spec = spec
        self.seqs = seqs
        self.arrival_mono = arrival_mono
        self.first_token_unix_s: float | None = None
        self.cut = False
        self._pending: list[TokenEvent] = []
        self._unfinished = len(seqs)
        self._wake = asyncio.Event()

    @property
    def done(self) -> bool:
        """Every sequence has produced its last token (some may not be read yet)."""
        return self._unfinished == 0

    @property
    def drained(self) -> bool:
        """Done, and every event has been taken by :meth:`next_events`."""
        return self._unfinished == 0 and not self._pending

    @property
    def completion_tokens(self) -> int:
        return sum(seq.generated for seq in self.seqs)

    @property
    def prompt_tokens(self) -> int:
        return sum(seq.prompt_tokens for seq in self.seqs)

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens the prefix cache spared (0 before admission or without the cache)."""
        return sum(seq.cached_tokens for seq in self.seqs)

    @property
    def preemptions(self) -> int:
        return sum(seq.preemptions for seq in self.seqs)

    def _push(self, event: TokenEvent) -> None:
        self._pending.append(event)
        if event.finish_reason is not None:
            self._unfinished -= 1
        self._wake.set()

    def _cut_off(self) -> None:
        self.cut = True
        self._wake.set()

    async def next_events(self) -> list[TokenEvent]:
        """Tokens produced since the last call (waits for at least one, or for a cut)."""
        while not self._pending and not self.cut:
            self._wake.clear()
            await self._wake.wait()
        events, self._pending = self._pending, []
        return events


def token_text(seed: int, seq_id: int, position: int) -> str:
    """The deterministic text of one generated token (one tokenizer token)."""
    return VOCAB[(seq_id * 2654435761 + position * 40503 + seed * 97) % len(VOCAB)]


def stop_point(params: SimParams, seq_id: int, spec: GenerationSpec) -> tuple[int, FinishReason]:
    """Where a sequence stops: a seeded geometric EOS unless ignore_eos, capped by max_tokens."""
    if spec.ignore_eos or params.eos_mean_tokens <= 1:
        return spec.max_tokens, "length"
    rng = random.Random(params.seed * 1_000_003 + seq_id)
    p = 1.0 / params.eos_mean_tokens
    eos = 1 + int(math.log(1.0 - rng.random()) / math.log(1.0 - p))
    eos = max(eos, spec.min_tokens, 1)
    return (eos, "stop") if eos < spec.max_tokens else (spec.max_tokens, "length")


class Engine:
    """The simulated inference engine; call :meth:`run` as a task, then :meth:`submit`."""

    def __init__(self, params: SimParams, observer: Observer | None = None) -> None:
        self.params = params
        self.observer = observer
        self.scheduler = Scheduler(params)
        self.busy = BusyWindow(params.max_num_seqs)
        self.health = LoopHealth()
        self.up = True
        self.restarts = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.finished_total: Counter[str] = Counter()
        self._next_seq_id = 0
        self._crash_requested = False
        self._wake = asyncio.Event()

    def submit(self, spec: GenerationSpec) -> Request:
        """Queue a request; raises :class:`Unavailable` or :class:`QueueFull`."""
        if not self.up:
            raise Unavailable("engine is restarting after a crash")
        n = len(spec.prompt_tokens)
        if not self.scheduler.can_accept(n):
            raise QueueFull(
                f"server is full: {self.params.max_num_seqs} running + "
                f"{self.params.max_waiting} waiting sequences"
            )
        seqs = []
        for index, prompt in enumerate(spec.prompt_tokens):
            seq_id = self._next_seq_id
            self._next_seq_id += 1
            stop_at, reason = stop_point(self.params, seq_id, spec)
            blocks = spec.prompt_blocks[index] if index < len(spec.prompt_blocks) else ()
            seq = Sequence(seq_id, prompt, stop_at, reason, index=index, block_hashes=blocks)
            seq.reserve = prompt + spec.max_tokens
            seqs.append(seq)
        request = Request(spec, seqs, asyncio.get_running_loop().time())
        for seq in seqs:
            seq.owner = request
        self.scheduler.add(seqs)
        self._wake.set()
        return request

    def abort(self, request: Request) -> None:
        """The client went away: free the request's slots and KV."""
        self.scheduler.remove(request.seqs)

    def shut_down(self) -> None:
        """Refuse new work and cut everything in flight (the server is stopping)."""
        self.up = False
        self._cut_all()

    def request_crash(self) -> None:
        """Crash at the next step boundary (the OOM path, for tests)."""
        self._crash_requested = True
        self._wake.set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time()
        while True:
            if self._crash_requested:
                await self._crash()
                continue
            result = self.scheduler.step()
            if result is None:
                self._wake.clear()
                await self._wake.wait()
                deadline = loop.time()
                continue
            now = loop.time()
            start = max(deadline, now - MAX_LAG_S)
            deadline = start + result.duration_s
            self.busy.add(start, deadline, result.batch)
            self._admitted(result, start)
            if deadline > now:
                await asyncio.sleep(deadline - now)
            woke = loop.time()
            self.health.record(woke - deadline)
            if would_oom(self.params, result.peak_kv_tokens):
                self._crash_requested = True
                continue
            self._deliver(result, woke)

    def _admitted(self, result: StepResult, start: float) -> None:
        for seq in result.admitted:
            if seq.admissions == 1:
                self.prompt_tokens_total += seq.prompt_tokens
                if self.observer:
                    self.observer.queue_time(start - seq.owner.arrival_mono)

    def _deliver(self, result: StepResult, now: float) -> None:
        self.generation_tokens_total += len(result.emitted)
        seed = self.params.seed
        observer = self.observer
        for seq in result.emitted:
            request: Request = seq.owner
            finish = seq.finish_reason if seq.generated >= seq.stop_at else None
            if request.first_token_unix_s is None:
                request.first_token_unix_s = time.time()
            request._push(
                TokenEvent(seq.index, token_text(seed, seq.seq_id, seq.generated), finish)
            )
            if observer is not None:
                if seq.generated == 1:
                    observer.ttft(now - request.arrival_mono)
                else:
                    observer.itl(now - seq.last_token_s)
            seq.last_token_s = now
        for seq in result.finished:
            self.finished_total[seq.finish_reason] += 1
            if self.observer:
                self.observer.e2e(now - seq.owner.arrival_mono, seq.finish_reason)

    async def _crash(self) -> None:
        self._crash_requested = False
        self.up = False
        self.restarts += 1
        self.busy.clear()
        self._cut_all()
        await asyncio.sleep(self.params.restart_s)
        self.up = True

    def _cut_all(self) -> None:
        for request in {id(s.owner): s.owner for s in self.scheduler.clear()}.values():
            request._cut_off()
