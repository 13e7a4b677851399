"""The curve replay's prompt source: each request's lengths drawn from the log around its time.

A request sent while stage ``s`` runs, ``d`` seconds after its announcement, replays log time
``T = window.log_start + d × time_scale``. The source takes the next record at or after ``T``
that no request of this run has taken yet, among the records this process owns: with ``n``
workers, worker ``k`` owns the records whose index is ``k`` mod ``n``, so one schedule split
across workers never sends a record twice. A closed loop at the log's concurrency sends fewer
requests than the log holds when time is compressed (a request still lasts as long as the server
takes), so the records run out only when the replay sends faster than the log did; then the
record nearest ``T`` is sent again and counted (``records_reused`` in run.json).

A record's lengths are its logged input and output tokens (a length the log lacks: the
``--llm-input-tokens`` / ``--llm-output-tokens`` default); the prompt is synthesised to that
length on the server's calibrated tokenizer, so the log's text (if any) is never read or sent,
and only the lengths and a hash reach ``requests.csv``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from loadknee_locust.curve.plan import CurvePlan, LengthIndex
from loadknee_locust.prompts.fixed import FixedLengthSource
from loadknee_locust.prompts.model import Endpoint, Prompt
from loadknee_locust.prompts.synth import PromptSynth

#: the announced stage and when it was announced (unix s), or None before the first
StageClock = Callable[[], tuple[int, float] | None]


class CurveSource(FixedLengthSource):
    """Lengths of the log's records around the replayed time; calibrated like fixed lengths."""

    kind = "curve"

    def __init__(
        self,
        synth: PromptSynth,
        plan: CurvePlan,
        index: LengthIndex,
        *,
        clock: StageClock,
        input_tokens: int,
        output_tokens: int,
        worker: int = 0,
        workers: int = 1,
        info: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(synth, input_tokens=input_tokens, output_tokens=output_tokens)
        if workers < 1 or not 0 <= worker < workers:
            raise ValueError(f"worker {worker} of {workers}")
        self.plan, self.index, self.clock = plan, index, clock
        self.worker, self.workers = worker, workers
        self._next = worker  # the next index this process may take
        self._pass = 0  # each scale replays the log afresh
        self.sent = 0
        self.reused = 0
        self._info = info or {}
        known = sorted(n for n in index.inputs if n > 0)
        if known:  # calibrate on the log's median input length
            self.calibration_targets = (known[len(known) // 2],)

    def replayed_time(self, now: float | None = None) -> float:
        """The log time a request sent ``now`` replays (the first window's start before any)."""
        stage = self.clock()
        if stage is None:
            return self.plan.windows[0].log_start_s
        index, since = stage
        index = min(max(index, 0), len(self.plan.windows) - 1)
        replay = self.plan.pass_of(index)
        if replay != self._pass:
            self._pass, self._next = replay, self.worker
        now = time.time() if now is None else now
        return self.plan.log_time(index, now - since)

    def take(self, t: float) -> int:
        """The index of the record to send for log time ``t`` (see the module docstring)."""
        n, k = len(self.index), self.workers
        first = self.index.first_at(t)
        if first > self._next:  # skip to this process's first record at or after t
            self._next = first + (self.worker - first) % k
        if self._next < n:
            chosen = self._next
            self._next += k
            self.sent += 1
            return chosen
        self.reused += 1  # nothing left after t: the nearest record, again
        return min(max(first, 0), n - 1)

    def next_prompt(self, endpoint: Endpoint) -> Prompt:
        i = self.take(self.replayed_time())
        n_in, n_out = self.index.inputs[i], self.index.outputs[i]
        return self.synth.build(
            endpoint,
            n_in if n_in > 0 else self.input_tokens,
            n_out if n_out > 0 else self.output_tokens,
        )

    def info(self) -> dict[str, Any]:
        base = super().info()
        del base["target_input_tokens"], base["target_output_tokens"]
        return {
            **base,
            "kind": self.kind,
            **self._info,
            "records_sent": self.sent,
            "records_reused": self.reused,
        }
