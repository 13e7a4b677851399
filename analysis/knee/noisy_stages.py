"""Whether a noisy stage's knee is in doubt, and that doubt carried into the knee's resamples.

"Noisy" says a stage's throughput interval is wider than ``max_interval_pct`` (or the stage had
none), not that its verdict is wrong: a knee that holds at both ends of its intervals stands
(:func:`knee_clears_noise`); one that does not yields to the queue's evidence
(:mod:`analysis.knee.queue_demotions`). The resamples of the knee's confidence have no intervals
of their own, so they take each stage's doubt from the answer (:func:`with_noise`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from analysis.knee.facts import GainFact, TailFact
from analysis.knee.stage_verdict import StageFacts, signal_of
from analysis.model import StageVerdict
from analysis.stages.data_check import RowsFact


def knee_clears_noise(verdict: StageVerdict) -> bool:
    """Whether a noisy stage's knee holds at both ends of its intervals: flat at the upper end of
    its gain (both stages' throughput intervals) and departed at the lower end of its tail.

    Why: "noisy" says the stage's throughput interval is wider than ``max_interval_pct``, not
    that its verdict is in doubt; the two signals already read their intervals. A compute-bound
    simulator (12 slots, prefill-heavy; a fresh machine under a CPU hog) served 89 → 104 tok/s at
    4 → 8 users (one user 48): at most 0.147× per user within a ±12.5 % interval, the tail at
    least 4.3× the baseline, 7 of 12 slots running. The server's free slots demoted that knee and
    the answer moved to 16 users' queue, capacity 8, which 2 % of the resamples gave (98 %: 4).
    A flattening read on point figures (no interval: ``gain_upper_ratio`` None) clears its noise
    only where the latency's reading of the same gain does (Little's law on the stages' median
    e2e and its order-statistic interval: :func:`~analysis.knee.signals.latency_gain`), and a
    tail without an interval only where its median's lower end is past the limit: the same
    simulator on a suite with a CPU hog had no interval at 8 users (its requests' spans too long
    for five windows), and the free slots moved the answer from 4 to 8."""
    flat = signal_of(verdict, "throughput_flattening")
    tail = signal_of(verdict, "tail_departure")
    if flat is None or tail is None or not (flat.fired and tail.fired):
        return False
    gain, departed = flat.fact, tail.fact
    if not isinstance(gain, GainFact) or not isinstance(departed, TailFact):
        return False
    return _flat_within_noise(gain) and _departed_within_noise(departed)


def _flat_within_noise(gain: GainFact) -> bool:
    """Flat at the upper end of the throughput's intervals, or, where the stage had none, of
    the latency's reading of the same gain (:func:`~analysis.knee.signals.latency_gain`)."""
    upper = gain.gain_upper_ratio
    if upper is None:
        upper = gain.latency_gain_upper_ratio
    return upper is not None and upper < gain.threshold_ratio


def _departed_within_noise(departed: TailFact) -> bool:
    """Departed at the lower end of the tail's interval, or with the median itself past the
    limit at its interval's lower end (the tail is above its median)."""
    lows = (departed.lower_ratio, departed.median_lower_ratio)
    return any(low is not None and low >= departed.threshold_ratio for low in lows)


def noise_in_doubt(verdict: StageVerdict) -> bool:
    """The stage is noisy and its verdict did not clear that noise (:func:`knee_clears_noise`)."""
    return verdict.noisy and not knee_clears_noise(verdict)


def with_noise(
    facts: StageFacts | RowsFact, noise: dict[int, bool] | None, row: Any
) -> StageFacts | RowsFact:
    """``facts`` with the stage's noise as :meth:`~analysis.knee.knee_inputs.KneeInputs.noise_as`
    set it, if it did."""
    if noise is None or not isinstance(facts, StageFacts):
        return facts
    fired = noise.get(int(row["stage"]))
    if fired is None:
        return facts
    return replace(facts, noisy=replace(facts.noisy, fired=fired))
