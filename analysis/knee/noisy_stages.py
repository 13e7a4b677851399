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
    A flattening read on point figures (no interval: ``gain_upper_ratio`` None) does not clear
    its noise."""
    flat = signal_of(verdict, "throughput_flattening")
    tail = signal_of(verdict, "tail_departure")
    if flat is None or tail is None or not (flat.fired and tail.fired):
        return False
    gain, departed = flat.fact, tail.fact
    if not isinstance(gain, GainFact) or not isinstance(departed, TailFact):
        return False
    upper, lower = gain.gain_upper_ratio, departed.lower_ratio
    return (
        upper is not None
        and upper < gain.threshold_ratio
        and lower is not None
        and lower >= departed.threshold_ratio
    )


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
