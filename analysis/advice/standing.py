"""Whether the answer stands on the data: whole, from the judged stages only, or "cannot tell".

Why: an answer printed beside stages that could not be judged reads as confident as any other,
and cluster files get built from it. Every level stage that is not judged (no usable rows: see
:mod:`analysis.stages.data_check`; rows that disagree with stages.csv: see
:mod:`analysis.stages.coverage`) has already been left out of the knee and of the deploy
figure; this step says what that leaves:

* ``cannot_tell`` / ``no_judged_stage`` — no level stage was judged: nothing to answer from;
* ``cannot_tell`` / ``unjudged_below`` — the first judged stage already breaks a limit while
  stages below it were not judged: "test lower" would be wrong (they were tested; their rows
  are missing), and no level is known to be safe;
* ``cannot_tell`` / ``late_client`` — the load generator ran late (:mod:`analysis.knee.late_client`)
  at a stage at or below the first level past the answer, or at the baseline (every tail's
  yardstick): that stage is untrusted, and with it untrusted the answer could be the client's;
  a late stage above the first level past the answer could not have moved it: the answer stands;
* ``cannot_tell`` / ``unsure`` — most resamples of the stages' time windows give another
  ``max_concurrency`` than the stages' own figures (:func:`moved_by_noise`): the answer is the
  noise's pick, not the server's;
* ``cannot_tell`` / ``tail_in_doubt`` — the answer counts a level as before the knee although
  its throughput had flattened and its tail was undecided (within the noise of the limit), and
  the fit over all stages puts the capacity below that level (:func:`tail_in_doubt`): which side
  of the knee the level is on is the noise's call;
* ``cannot_tell`` / ``starved_server`` — the server shares the load generator's machine, the
  machine was overloaded at a level that decided the answer (the first past the deploy figure
  or past the capacity), and the server's throughput fell there (:func:`starved_server`): that
  level measured the machine;
* ``partial`` — an answer from the judged stages, with the stages left out named;
* ``answer`` — every level stage judged.

``cannot_tell`` means exit 3 from ``loadknee analyze``, no setting recommended and no cluster
file written. Facts only: :mod:`analysis.report.standing` has the words.
"""

from __future__ import annotations

from collections.abc import Sequence

from analysis.advice.facts import DeployAnswer
from analysis.diagnosis.facts import SharedHostFact
from analysis.knee.facts import ConfidenceFact, GainFact, LateClientFact
from analysis.knee.signals import tail_undecided
from analysis.knee.stage_verdict import has_fired, signal_of
from analysis.model import KneeResult, RowCoverage, Standing


def answer_standing(
    knee: KneeResult,
    deploy: DeployAnswer | None,
    coverage: RowCoverage | None = None,
    baseline_late: LateClientFact | None = None,
    overloaded: Sequence[SharedHostFact] = (),
) -> Standing:
    """What the answer rests on (pure); ``baseline_late``: the baseline stage's lag where it
    was late (:func:`analysis.knee.late_client.late_baseline`); ``overloaded``: the stages
    where a server on this machine met it overloaded
    (:func:`analysis.diagnosis.failures.overloaded_stages`)."""
    coverage = coverage or RowCoverage()
    unjudged = tuple(
        sorted(v.target_users for v in knee.stages if v.verdict == "insufficient_data")
    )
    judged = knee.judged
    if not judged:
        return Standing("cannot_tell", "no_judged_stage", unjudged, coverage)
    if deploy is not None and deploy.users is None and deploy.bound != "none" and unjudged:
        first = min((v.target_users for v in judged if v.trusted), default=None)
        if first is not None and min(unjudged) < first:
            return Standing("cannot_tell", "unjudged_below", unjudged, coverage)
    first_past = first_level_past(knee, deploy)
    late = tuple(f for f in late_stages(knee) if first_past is None or f.users <= first_past)
    base = baseline_late if baseline_late is not None and baseline_late.late else None
    if late or base is not None:
        return Standing("cannot_tell", "late_client", unjudged, coverage, late, base, first_past)
    deciding = deciding_levels(knee, deploy)
    if (starved := starved_server(knee, deciding, overloaded)) is not None:
        return Standing("cannot_tell", "starved_server", unjudged, coverage,
                        first_past=first_past, starved=starved)  # fmt: skip
    if moved_by_noise(knee) is not None:
        return Standing("cannot_tell", "unsure", unjudged, coverage)
    if (doubt := tail_in_doubt(knee, None if deploy is None else deploy.users)) is not None:
        return Standing("cannot_tell", "tail_in_doubt", unjudged, coverage, in_doubt=doubt)
    if unjudged or coverage.faults:
        return Standing("partial", None, unjudged, coverage)
    return Standing("answer", None, (), coverage)


def moved_by_noise(knee: KneeResult) -> ConfidenceFact | None:
    """The knee's confidence when another ``max_concurrency`` is more common among the resamples
    than the answer itself (None otherwise, or with no confidence figure).

    Why: the resamples judge every stage by the answer's own rule (:mod:`analysis.knee.confidence`),
    so an answer that most of them do not give sits on the noise's edge: a flattening at 0.149×
    of one user's rate against the 0.15× rule flips with a few windows. Printing it as the
    capacity would be the noise's pick; an answer that holds in most resamples stands, with its
    share beside it."""
    fact = knee.confidence
    if (
        not isinstance(fact, ConfidenceFact)
        or fact.same_pct is None
        or knee.max_concurrency is None
    ):
        return None
    top = max((share for _, share in fact.others), default=0.0)
    return fact if top > fact.same_pct else None


def tail_in_doubt(knee: KneeResult, deployed: int | None = None) -> int | None:
    """The lowest level at or below the answer (and at or below ``deployed``, the deploy figure,
    where there is one: an SLO or the memory may set it lower, and levels above it do not move
    it) whose throughput had flattened and whose tail was undecided, above the fit's 90 %
    interval of the capacity (None: no such level, or no fit).

    Why: the answer is the level below the first knee, so every level up to it was judged "not
    past the knee". A level whose throughput had stopped growing was held back only by its
    tail; where that tail is within the noise of the limit (a 6-request baseline's P95 one slow
    request above its median: twice a 4-slot server's slots at 1.96x, "held") the level's side
    of the knee is the noise's call, and so is the answer. The resamples cannot see it (stages
    too short for an interval resample to themselves: 100 % agreement), but the fit over all
    stages can: when it puts the capacity below the level (4 users, 90 % interval 3-4, for an
    answer of 8) the answer is not the server's. A flattened level with an undecided tail
    inside the fit's interval is the fit's answer too: it stands."""
    high, answer = knee.capacity_high, knee.max_concurrency
    if high is None or answer is None:
        return None
    if deployed is not None:
        answer = min(answer, deployed)
    for verdict in sorted(knee.judged, key=lambda v: v.target_users):
        users = verdict.target_users
        if not high < users <= answer or not has_fired(verdict, "throughput_flattening"):
            continue
        tail = signal_of(verdict, "tail_departure")
        if tail is not None and tail_undecided(tail):
            return users
    return None


def deciding_levels(knee: KneeResult, deploy: DeployAnswer | None) -> tuple[int, ...]:
    """The judged levels whose verdicts set the answer: the first past the deploy figure (the
    level whose tail, errors or memory held the deploy figure where it is) and the first past
    every figure the answer gives (:func:`first_level_past`), lowest first."""
    levels = {first_level_past(knee, deploy)}
    if deploy is not None and deploy.users:
        reach = deploy.users
        levels.add(
            min((v.target_users for v in knee.judged if v.target_users > reach), default=None)
        )
    return tuple(sorted(u for u in levels if u is not None))


def starved_server(
    knee: KneeResult, deciding: Sequence[int], overloaded: Sequence[SharedHostFact]
) -> SharedHostFact | None:
    """The overloaded-machine fact of the lowest ``deciding`` level (:func:`deciding_levels`)
    where the server's throughput fell by at least the flat rule's margin per added user (the
    upper bound within both stages' intervals where they have one); None otherwise.

    Why: a server that runs out of slots, KV or compute stops gaining throughput; it does not
    lose it. On a machine it shares with the load generator and the test's other work, a fall
    at a level that decided the answer is the CPU the server waited for: a 10-slot simulator
    under a test suite (load 5-6 on 2 cores) served 428 tok/s at 6 users and 333 at 8 with its
    P95 at 2.01x the baseline, and the answer 6 stood beside a warning only, its fit agreeing
    (the fit reads the same starved stages); without /metrics the same run deployed 6 "bound by
    the tail's departure" at 8. Only deciding levels count: a starved stage below them that
    still gained did not move the answer, and one that lost would have decided it itself."""
    for users in deciding:
        fact = next((f for f in overloaded if f.users == users), None)
        verdict = next((v for v in knee.judged if v.target_users == users), None)
        if fact is None or verdict is None:
            continue
        flat = signal_of(verdict, "throughput_flattening")
        gain = None if flat is None else flat.fact
        if not isinstance(gain, GainFact):
            continue
        ratio = gain.gain_upper_ratio if gain.gain_upper_ratio is not None else gain.gain_ratio
        if ratio is not None and ratio <= -gain.threshold_ratio:
            return fact
    return None


def late_stages(knee: KneeResult) -> list[LateClientFact]:
    """The judged level stages' lag facts where their load generator was late."""
    return [
        s.fact
        for v in knee.judged
        for s in v.signals
        if s.name == "client_late" and s.fired and isinstance(s.fact, LateClientFact)
    ]


def first_level_past(knee: KneeResult, deploy: DeployAnswer | None) -> int | None:
    """The lowest judged level above every figure the answer gives (the deploy figure and
    ``max_concurrency``): the stage that decided it; the lowest level when neither is a level
    (no tested stage was safe); None when the answer is the top tested level."""
    figures = [f for f in (None if deploy is None else deploy.users, knee.max_concurrency) if f]
    reach = max(figures, default=0)
    return min((v.target_users for v in knee.judged if v.target_users > reach), default=None)
