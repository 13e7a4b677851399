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
* ``partial`` — an answer from the judged stages, with the stages left out named;
* ``answer`` — every level stage judged.

``cannot_tell`` means exit 3 from ``loadknee analyze``, no setting recommended and no cluster
file written. Facts only: :mod:`analysis.report.standing` has the words.
"""

from __future__ import annotations

from analysis.advice.facts import DeployAnswer
from analysis.knee.facts import ConfidenceFact, LateClientFact
from analysis.knee.signals import tail_undecided
from analysis.knee.stage_verdict import has_fired, signal_of
from analysis.model import KneeResult, RowCoverage, Standing


def answer_standing(
    knee: KneeResult,
    deploy: DeployAnswer | None,
    coverage: RowCoverage | None = None,
    baseline_late: LateClientFact | None = None,
) -> Standing:
    """What the answer rests on (pure); ``baseline_late``: the baseline stage's lag where it
    was late (:func:`analysis.knee.late_client.late_baseline`)."""
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
