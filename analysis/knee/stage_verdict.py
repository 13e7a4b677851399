"""One stage's verdict from its signals (red line, knee, critical, comfortable), with its reasons.

The order of the rules is the method's (docs/method.md, Verdicts): the red line (an error share
past the limit, or OOM) first; then the knee, from the server's own saturation where it counts
its queue, from the client's queue estimate where it does not, or from a flattening with a
departed tail; then any early sign makes the stage critical. A stage whose figures read the
client (client-bound, starved or late) is untrusted and never the knee. The helpers at the end
read a verdict's signals and turn a knee into "critical" for the later passes
(:mod:`analysis.knee.queue_demotions`, :mod:`analysis.knee.dips`), so every pass reads and
rewrites a verdict one way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from analysis.knee.client_signals import client_saturation_signal, cross_check, starved
from analysis.knee.facts import ClientBoundFact, GaugeCheckFact, NoSignalFact, PlateauFact
from analysis.knee.late_client import late_client_signal
from analysis.knee.signals import (
    StageContext,
    client_signal,
    error_signals,
    memory_signals,
    noise_signal,
    saturation_signal,
    tail_signals,
    tail_undecided,
    throughput_signals,
)
from analysis.model import Signal, StageVerdict, Verdict
from analysis.stages.data_check import RowsFact, excluded_rows, insufficient_rows

if TYPE_CHECKING:
    from analysis.model import Reason


@dataclass(frozen=True)
class StageFacts:
    """A stage's signals that no throughput or tail figure changes (memory, errors, the client,
    the queues, the noise): the knee's confidence reads them once per stage, not per resample."""

    pressure: Signal
    risk: Signal
    oom: Signal
    some_errors: Signal
    error_rate: Signal
    client: Signal
    saturated: Signal
    queued: Signal
    starving: Signal
    noisy: Signal
    late: Signal | None  # the load generator's lag (None: not measured, an older run)
    disagree: GaugeCheckFact | None  # the server's gauges against the client's estimate
    note: RowsFact | None  # the rows excluded for missing their lengths

    @property
    def late_client(self) -> bool:
        """The stage's load generator was late (:mod:`analysis.knee.late_client`): untrusted."""
        return self.late is not None and self.late.fired


def stage_facts(row: Any, prev: Any | None, ctx: StageContext) -> StageFacts | RowsFact:
    """The stage's :class:`StageFacts`, or why it has too little data to judge."""
    lacking = insufficient_rows(row)
    if lacking is not None:
        return lacking
    saturated = saturation_signal(row, ctx)
    queued = client_saturation_signal(row, ctx)
    return StageFacts(
        *memory_signals(row, prev, ctx),
        *error_signals(row, ctx),
        client_signal(row, ctx),
        saturated,
        queued,
        starved(row),
        noise_signal(row, ctx),
        late_client_signal(row),
        cross_check(row, saturated, queued) if saturated.value is not None else None,
        excluded_rows(row),
    )


def evaluate_stage(
    row: Any,
    prev: Any | None,
    ctx: StageContext,
    facts: StageFacts | RowsFact | None = None,
    *,
    words: bool = True,
) -> StageVerdict:
    """All signals of one stage and the verdict they add up to; ``facts`` are
    :func:`stage_facts` of the same row, previous stage and context when already known.
    ``words=False`` leaves the reasons out (the knee's confidence needs only the answer)."""
    facts = stage_facts(row, prev, ctx) if facts is None else facts
    stage, users = int(row["stage"]), int(row["target_users"])
    if isinstance(facts, RowsFact):  # no signal can be read from it: never "comfortable"
        reasons = (facts,) if words else ()
        return StageVerdict(stage, users, "insufficient_data", reasons, signals=(), trusted=True)
    flat, narrowing = throughput_signals(row, prev, ctx)
    fit, on = ctx.fit, float(row["target_users"])
    if not flat.fired and fit is not None and fit.flat and on > fit.high:
        plateau = PlateauFact("on_plateau", on, fit.capacity, fit.low, fit.high, fit.plateau)
        flat = replace(flat, fired=True, fact=plateau)
    departed, sla = tail_signals(row, ctx)
    f = facts
    signals = (flat, narrowing, departed, sla, f.pressure, f.risk, f.some_errors, f.error_rate,
               f.oom, f.client, f.saturated, f.queued, f.starving, f.noisy, f.late)  # fmt: skip
    # the server's own gauges decide where it has them; the client's estimate where it has none
    gauged = f.saturated.value is not None
    untrusted = f.client.fired or f.starving.fired or f.late_client
    verdict: Verdict
    if f.error_rate.fired or f.oom.fired:
        verdict, fired = "red_line", [s for s in (f.oom, f.error_rate) if s.fired]
    elif f.saturated.fired and not untrusted:
        verdict, fired = "knee", [f.saturated, *(s for s in (flat, departed) if s.fired)]
    elif f.queued.fired and not gauged and not untrusted:
        verdict, fired = "knee", [f.queued, *(s for s in (flat, departed) if s.fired)]
    elif flat.fired and departed.fired and not untrusted:
        verdict, fired = "knee", [flat, departed]
    else:
        early = (flat if flat.fired else narrowing, departed, f.pressure, f.risk, f.some_errors)
        fired = [s for s in (*early, sla) if s is not None and s.fired]
        verdict = "critical" if fired else "comfortable"
    return StageVerdict(
        stage=stage,
        target_users=users,
        verdict=verdict,
        reasons=_reasons(verdict, fired, departed, sla, facts) if words else (),
        signals=tuple(s for s in signals if s is not None),
        trusted=not untrusted,
        noisy=f.noisy.fired,
    )


def _reasons(
    verdict: Verdict,
    fired: list[Signal],
    departed: Signal,
    sla: Signal | None,
    facts: StageFacts,
) -> tuple[Reason, ...]:
    """The stage's reasons: the signals behind its verdict first, then the early signs, the
    client's and the noise's caveats (each once)."""
    risk, pressure, some_errors = facts.risk, facts.pressure, facts.some_errors
    reasons: list[Reason] = list(fired)
    extra = [s for s in (risk, pressure, some_errors, sla) if s and s.fired and s not in fired]
    hidden = {id(pressure)} if risk.fired else set()  # "risks OOM" already says "pressure"
    if facts.error_rate.fired:
        hidden.add(id(some_errors))  # the red-line fact already counts the failures
    reasons += [s for s in extra if id(s) not in hidden]
    if facts.client.fired:
        reasons.append(ClientBoundFact(facts.client))
    if facts.starving.fired:
        reasons.append(facts.starving)
    if facts.late is not None and facts.late.fired:
        reasons.append(facts.late)
    if facts.disagree is not None:
        reasons.append(facts.disagree)
    if verdict == "comfortable":
        reasons.append(NoSignalFact())
    if tail_undecided(departed):  # past the limit, but not past the noise: say so
        reasons.append(departed)
    if facts.noisy.fired:
        reasons.append(facts.noisy)
    if facts.note is not None:
        reasons.append(facts.note)
    return tuple({id(r): r for r in reasons}.values())


def signal_of(verdict: StageVerdict, name: str) -> Signal | None:
    """The verdict's signal of that name (None: the stage did not read it)."""
    return next((s for s in verdict.signals if s.name == name), None)


def has_fired(verdict: StageVerdict, name: str) -> bool:
    """Whether the verdict's signal of that name fired."""
    return any(s.name == name and s.fired for s in verdict.signals)


def demote_knees(
    verdicts: list[StageVerdict], why: Callable[[int, StageVerdict], Signal | None]
) -> list[StageVerdict]:
    """``verdicts`` with each "knee" for which ``why`` (its position and verdict) gives a signal
    made "critical", that signal its first reason and its last signal: every later pass that
    finds a knee was none rewrites it this one way."""
    out = list(verdicts)
    for i, verdict in enumerate(verdicts):
        signal = why(i, verdict) if verdict.verdict == "knee" else None
        if signal is not None:
            out[i] = replace(
                verdict,
                verdict="critical",
                reasons=(signal, *verdict.reasons),
                signals=(*verdict.signals, signal),
            )
    return out
