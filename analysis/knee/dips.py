"""A "knee" that a later stage out-serves was a dip, not the point where throughput stopped
growing: it becomes "critical" (:func:`demote_dips`, docs/method.md, Dip, not knee)."""

from __future__ import annotations

from typing import Any

from analysis.knee.facts import ResumedFact
from analysis.knee.refusal_signal import REFUSALS
from analysis.knee.slot_bounds import queued
from analysis.knee.stage_verdict import demote_knees, has_fired
from analysis.model import Signal, StageVerdict
from loadknee_core.knee_params import KneeParams
from loadknee_core.numeric import num


def _recovers(
    rate: float,
    before: tuple[float, int] | None,
    later: tuple[float, int],
    params: KneeParams,
    x1: float | None,
) -> bool:
    """Whether a later stage (rate, users) out-serves a flat stage serving ``rate`` by
    ``resume_gain_pct`` and gains at least the flat ratio per user over the stage ``before`` it."""
    if later[0] < rate * (1 + params.resume_gain_pct / 100):
        return False
    if not x1 or before is None or later[1] <= before[1]:
        return True
    return (later[0] - before[0]) / (later[1] - before[1]) / x1 >= params.flat_gain_ratio


def demote_dips(
    rows: list[Any], verdicts: list[StageVerdict], params: KneeParams, x1: float | None = None
) -> list[StageVerdict]:
    """A "knee" that a later stage (before the red line) out-serves by ``resume_gain_pct`` or
    more was a dip, not the point where throughput stopped growing: it becomes "critical".

    Real engines dip: llama-server on 2 busy cores served 125 → 144 → 237 tok/s at 2 → 4 → 8
    users; the flat step to 4 with its departed tail read as the knee, yet 8 users served 65 %
    more. The knee is where added users stop paying, for good.

    A later stage that out-serves the knee but whose gain over the last stage *before* the knee
    is still flat per added user (below ``flat_gain_ratio`` of one user's rate) is no recovery:
    the knee stage fell below the plateau, the plateau held. llama-server with 8 slots served
    420 tok/s at 8 users, 300 at 16 and 500 at 32 (97 alone): 8 → 32 bought 0.03× per user,
    yet 16 read as a dip and the knee moved to 32, max_concurrency 16 on 8 slots.

    A red line of refusals does not end the search: its served requests measure the server. A
    server refusing above 10, starved for its 2 s refine stage at 10 users beside three other
    test processes, served 954 tok/s there at twice the latency, then 1,720 at 12 users with 10
    in flight and its usual latency: 10 was a dip, and the refusals bound the answer."""
    col = params.throughput_column
    rates = [num(row[col]) for row in rows]

    def resumed(i: int, verdict: StageVerdict) -> Signal | None:
        rate = rates[i]
        if not rate or queued(verdict):
            return None  # queued: the server (or the client's view of it) queued, not a dip
        earlier = reversed(list(zip(rates[:i], verdicts[:i], strict=True)))
        served = ((r, v.target_users) for r, v in earlier if r and v.verdict != "insufficient_data")
        before = next(served, None)  # the last served stage before this one
        best: tuple[float, int] | None = None
        for later, later_rate in zip(verdicts[i + 1 :], rates[i + 1 :], strict=True):
            if later.verdict == "red_line" and not has_fired(later, REFUSALS):
                break  # a breakdown: nothing past it measures the server (a refusal does)
            if (
                later_rate is not None
                and later.trusted
                and _recovers(rate, before, (later_rate, later.target_users), params, x1)
                and (best is None or later_rate > best[0])
            ):
                best = (later_rate, later.target_users)
        if best is None:
            return None
        gain_pct = params.resume_gain_pct
        fact = ResumedFact("throughput_resumed", col, best[1], best[0], rate, gain_pct)
        return Signal("throughput_resumed", True, best[0] / rate, 1 + gain_pct / 100, fact=fact)

    return demote_knees(verdicts, resumed)
