"""A "knee" that the queue's evidence contradicts becomes "critical".

Three passes, each on the stages' verdicts after :func:`~analysis.knee.stage_verdict.
evaluate_stage`: a noisy knee where the server says it had free slots and nothing waited
(:func:`demote_unsaturated`); without the server's gauges, a noisy knee where the client's own
queue estimate saw nothing wait (:func:`demote_unqueued`); a knee resting on the client's queue
estimate that a later stage shows passing (:func:`demote_passing_queues`). Each pass's docstring
gives the run that called for it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from analysis.knee.client_signals import CLIENT_SATURATED_WAITING
from analysis.knee.facts import ClientUnqueuedFact, QueuePassedFact, ServerQueueFact
from analysis.knee.noisy_stages import noise_in_doubt
from analysis.knee.signals import StageContext, free_slots_signal
from analysis.knee.slot_bounds import client_queued, saturated_slots, server_gauged
from analysis.knee.stage_verdict import demote_knees, has_fired, signal_of
from analysis.model import Signal, StageVerdict
from loadknee_core.numeric import num


def demote_unsaturated(
    rows: list[Any], verdicts: list[StageVerdict], ctx: StageContext
) -> list[StageVerdict]:
    """A "knee" from an untrusted client figure where the server says it had free slots and
    nothing waited becomes "critical"; where no stage queued, so does one in a stage without
    the server's gauges whose client estimate saw nothing wait (:func:`demote_unqueued`).

    Why: a stage too short for an interval (or with one too wide) judges flattening on its point
    figure. On a 2 s window the 40-slot simulator served 1,177 tok/s at 32 users and 1,124 at 34
    (one request per user, edges dominate) while its own counters said 34 running, 0 waiting;
    48 users then queued 8 behind 40 running. The refinement bisected into 34 and recommended
    32 for a server with 40 slots. The server's word is the better evidence there; a stage
    measured well enough for a trusted interval keeps its client-side verdict (a compute-bound
    bend below the slot count still shows as a knee), and so does one whose knee clears its own
    noise (:func:`~analysis.knee.noisy_stages.knee_clears_noise`).

    Before any stage queued, "free slots" says only that nothing waited (the running maximum
    may be the users offered): the server's word still stands against a noisy figure, as the
    client's estimate does without gauges. A 40-slot simulator on a busy machine (3 s stages)
    read 1,128 -> 1,141 tok/s at 28 -> 30 users, flat within both stages' noise, while the
    server said 30 running, 0 waiting; the knee stood only because no stage had queued yet, the
    sweep stopped at 32 and the answer was 28."""
    if saturated_slots(verdicts, ctx) is None:
        verdicts = demote_unqueued(verdicts)  # stages without the server's gauges

    def free_slots(i: int, verdict: StageVerdict) -> Signal | None:
        if not noise_in_doubt(verdict) or has_fired(verdict, "server_saturated"):
            return None
        free = free_slots_signal(rows[i], ctx)
        if not free.fired or not isinstance(free.fact, ServerQueueFact):
            return None
        return replace(free, fact=replace(free.fact, overrules_client=True))

    return demote_knees(verdicts, free_slots)


def demote_unqueued(verdicts: list[StageVerdict]) -> list[StageVerdict]:
    """Without the server's gauges: a "knee" judged on an untrusted client throughput figure (no
    interval, or one too wide) in a stage where the client's own queue estimate saw nothing wait
    becomes "critical". The client's queue estimate rests on every request's TTFT, the flattening
    on the difference of two noisy rates: on 8 s windows too short for an interval the 40-slot
    simulator's 30 → 32 users gained 0.14× one user's rate (the compute bend's own slope there)
    while 0.4 requests waited, and the sweep stopped at 32, max_concurrency 30 for 40 slots.
    A knee that clears its own noise (:func:`~analysis.knee.noisy_stages.knee_clears_noise`)
    stands."""

    def unqueued(_: int, verdict: StageVerdict) -> Signal | None:
        queue = signal_of(verdict, "client_saturated")
        if not noise_in_doubt(verdict) or queue is None or queue.value is None or queue.fired:
            return None
        if server_gauged(verdict) or queue.value >= CLIENT_SATURATED_WAITING:
            return None  # the server's word decides; or something waited, only not enough
        fact = ClientUnqueuedFact("client_unqueued", queue.value, CLIENT_SATURATED_WAITING)
        return Signal("client_unqueued", True, queue.value, CLIENT_SATURATED_WAITING, fact=fact)

    return demote_knees(verdicts, unqueued)


def _client_queue(row: Any) -> tuple[float | None, float | None]:
    """The stage's requests waiting and in flight, as the client estimated them."""
    return num(row.get("client_waiting")), num(row.get("client_in_flight"))


def demote_passing_queues(rows: list[Any], verdicts: list[StageVerdict]) -> list[StageVerdict]:
    """A "knee" resting on the client's queue estimate (no server gauges) becomes "critical"
    when a later judged stage kept at least as many requests in flight and saw none wait (its
    client estimate under :data:`~analysis.knee.client_signals.CLIENT_SATURATED_WAITING`).

    Why: a queue at a slot or KV limit does not empty as users are added. Beside three other
    test processes on two cores, an independent server refusing above 10 (queueing nothing)
    answered 40 % slower for one 2 s refine stage at 10 users (TTFT P50 140 ms against 76 ms
    at every other level: the server's process was starved): a third of its requests read as
    waiting, 0.76 on average, and the answer was 9 "bound by the knee", while 12 and 16 users,
    9.8 in flight, saw 0.04 and 0.10 wait."""

    def passed(i: int, verdict: StageVerdict) -> Signal | None:
        if not client_queued(verdict) or has_fired(verdict, "server_saturated"):
            return None
        waiting, in_flight = _client_queue(rows[i])
        if waiting is None or in_flight is None:
            return None
        for later, after in zip(verdicts[i + 1 :], rows[i + 1 :], strict=True):
            later_waiting, later_flight = _client_queue(after)
            if (
                later.verdict == "insufficient_data"
                or later_waiting is None
                or later_flight is None
                or later_flight < in_flight
                or later_waiting >= CLIENT_SATURATED_WAITING
            ):
                continue
            fact = QueuePassedFact(
                "queue_passed", waiting, in_flight, later.target_users, later_waiting, later_flight
            )
            return Signal("queue_passed", True, later_waiting, CLIENT_SATURATED_WAITING, fact=fact)
        return None

    return demote_knees(verdicts, passed)
