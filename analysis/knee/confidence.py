"""How sure the knee is: resample every stage's time windows and run the knee rule again.

Each resample draws, for every stage with per-window data (:class:`~analysis.stages.intervals.
StageBatches`), its windows again with replacement: the stage's throughput becomes the mean of
the drawn windows' rates and its e2e P95/P99 the percentiles of the drawn windows' requests (the
same block bootstrap as the intervals, so time-correlated requests stay together). The knee
rule (:func:`analysis.knee.find.find_knee`, the one implementation) runs on each resampled record
table with the interval columns cleared, so the resample itself is the noise. The share of
resamples giving the same ``max_concurrency`` is the knee's confidence, said in words with the
number of resamples and the other answers seen ("max_concurrency 12: the knee stage holds in
97 % of 200 resamples").

Stages without per-window data (too short, or a typed-in table) keep their figures in every
resample; the answer's confidence then covers only the noise that could be measured, and the
stages concerned are already marked untrusted by the knee.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

import pandas as pd

from analysis import rules
from analysis.knee.find import KneeParams, find_knee
from analysis.model import Baseline, KneeResult
from analysis.stages.array_intervals import resampled_tables
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
        return replace(knee, confidence="no confidence figure: no stage had per-window data")
    rng = random.Random(seed)
    answers: Counter[int | None] = Counter()
    params = replace(params, fit_resamples=0)  # the resampling here is the fit's noise too
    for table in resampled_tables(summary, batches, rng, params.throughput_column, resamples):
        answers[find_knee(table, baseline, params=params).max_concurrency] += 1
    same = answers[knee.max_concurrency] / resamples * 100.0
    what = "the knee stage" if knee.knee_users is not None else "the answer"
    others = ", ".join(
        f"{'none' if users is None else users} in {count / resamples * 100:.0f} %"
        for users, count in answers.most_common()
        if users != knee.max_concurrency
    )
    if same >= CONFIDENT_PCT:
        word = "confident"
    elif same >= UNSURE_PCT:
        word = "fairly sure"
    else:
        word = "unsure: the data cannot tell, measure longer stages"
    text = (
        f"max_concurrency {knee.max_concurrency}: {what} holds in {same:.0f} % of {resamples} "
        f"resamples of the stages' time windows ({word})"
        + (f"; otherwise {others}" if others else "")
        + f" {rules.cite('noisy')}"
    )
    return replace(knee, confidence_pct=same, confidence=text)
