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
* ``partial`` — an answer from the judged stages, with the stages left out named;
* ``answer`` — every level stage judged.

``cannot_tell`` means exit 3 from ``loadknee analyze``, no setting recommended and no cluster
file written. Facts only: :mod:`analysis.report.standing` has the words.
"""

from __future__ import annotations

from analysis.model import DeployAnswer, KneeResult, RowCoverage, Standing


def answer_standing(
    knee: KneeResult, deploy: DeployAnswer | None, coverage: RowCoverage | None = None
) -> Standing:
    """What the answer rests on (pure)."""
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
    if unjudged or coverage.faults:
        return Standing("partial", None, unjudged, coverage)
    return Standing("answer", None, (), coverage)
