"""How sure the knee is: resample every stage's time windows and run the knee rule again.

Each resample draws, for every stage with per-window data (:class:`~analysis.stages.intervals.
StageBatches`), its windows again with replacement: the stage's throughput becomes the mean of
the drawn windows' rates and its e2e P95/P99 the percentiles of the drawn windows' requests (the
same block bootstrap as the intervals, so time-correlated requests stay together). The knee
rule (:func:`analysis.knee.find.find_knee`'s, the one implementation) runs on each resampled
record table with the interval columns cleared (the throughput's precision in % kept: a stage
judged within its noise is judged within it in every resample), so the resample itself is the
noise: the table is taken apart once and each resample swaps in its columns
(:func:`resampled_answers`). The share of
resamples giving the same ``max_concurrency`` is the knee's confidence, said in words with the
number of resamples and the other answers seen ("max_concurrency 12: the knee stage holds in
97 % of 200 resamples").

Stages without per-window data (too short, or a typed-in table) keep their figures in every
resample; the answer's confidence then covers only the noise that could be measured, and the
stages concerned are already marked untrusted by the knee. Where such a stage is one that sets
the answer (the capacity's own stage or the first past it), every resample gives the answer
back by construction: "100 % of resamples agree" would be a claim about noise nobody measured.
The fact then names those stages (``unresampled``) and the knee carries no confidence figure;
the words say why and what to do (hold the stages longer).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

import pandas as pd

from analysis.knee.facts import ConfidenceFact
from analysis.knee.find import KneeInputs, KneeParams, judged_max_concurrency
from analysis.model import Baseline, KneeResult
from analysis.stages.array_intervals import cleared, resampled_columns
from analysis.stages.intervals import StageBatches

#: resamples by default: a 95 % share is then known to about ±1.5 points
RESAMPLES = 200
#: at or above this share the answer is called confident; below UNSURE_PCT it is unsure
CONFIDENT_PCT = 90.0
UNSURE_PCT = 60.0


def knee_confidence(
    summary: pd.DataFrame,
    baseline: Baseline,
    knee: KneeResult,
    batches: Mapping[int, StageBatches],
    *,
    params: KneeParams | None = None,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> KneeResult:
    """``knee`` with ``confidence_pct`` and ``confidence`` filled in (pure; seeded)."""
    params = params or KneeParams()
    if knee.max_concurrency is None or not any(b.rates for b in batches.values()):
        fact = ConfidenceFact(knee.max_concurrency, False, None, 0, (), CONFIDENT_PCT, UNSURE_PCT)
        return replace(knee, confidence=fact)
    answers = Counter(
        resampled_answers(
            summary, baseline, batches, random.Random(seed), params, resamples, judged=knee
        )
    )
    same = answers[knee.max_concurrency] / resamples * 100.0
    others = tuple(
        (users, count / resamples * 100)
        for users, count in answers.most_common()
        if users != knee.max_concurrency
    )
    fact = ConfidenceFact(
        knee.max_concurrency,
        knee.knee_users is not None,
        same,
        resamples,
        others,
        CONFIDENT_PCT,
        UNSURE_PCT,
        unresampled=unresampled_deciders(knee, batches),
    )
    return replace(knee, confidence_pct=same if fact.measured else None, confidence=fact)


def unresampled_deciders(knee: KneeResult, batches: Mapping[int, StageBatches]) -> tuple[int, ...]:
    """The stages that set the answer, the capacity's own and the first past it (the knee
    stage or the red line), that have no per-window data, lowest first.

    Why these two: the answer is "the stage before the first stage past it", so a resample can
    move it only by moving one of them (or by making a lower stage the first past: that noise
    the resamples do measure). A stage with no windows to draw keeps its figures in all of
    them."""
    first_past = knee.knee_users if knee.knee_users is not None else knee.red_line_users
    deciders = {u for u in (knee.max_concurrency, first_past) if u is not None}
    fixed = {
        v.target_users
        for v in knee.stages
        if v.target_users in deciders and ((b := batches.get(v.stage)) is None or not b.rates)
    }
    return tuple(sorted(fixed))


def resampled_answers(
    summary: pd.DataFrame,
    baseline: Baseline,
    batches: Mapping[int, StageBatches],
    rng: random.Random,
    params: KneeParams,
    resamples: int,
    judged: KneeResult | None = None,
) -> list[int | None]:
    """Per resample, the ``max_concurrency`` the knee rule gives for its table.

    The table is taken apart once (:class:`~analysis.knee.find.KneeInputs` of the table with its
    intervals cleared); each resample only swaps in its throughput and tail columns
    (:func:`~analysis.stages.array_intervals.resampled_columns`) and runs the rule again: what
    :func:`~analysis.knee.find.find_knee` would answer on the resampled table, without
    rebuilding the rest from a frame 200 times. ``judged``: the answer's own judgement, whose
    stages' noise the resamples keep (:meth:`~analysis.knee.find.KneeInputs.noise_as`)."""
    params = replace(params, fit_resamples=0)  # the resampling here is the fit's noise too
    inputs = KneeInputs(cleared(summary), baseline, params)
    if judged is not None:
        inputs = inputs.noise_as(judged)
    columns = resampled_columns(summary, batches, rng, params.throughput_column, resamples)
    rows = {name: values.tolist() for name, values in columns.items()}
    return [
        judged_max_concurrency(inputs.with_columns({name: v[r] for name, v in rows.items()}))
        for r in range(resamples)
    ]
