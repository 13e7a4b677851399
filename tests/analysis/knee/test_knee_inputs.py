"""The knee's confidence judges resamples through KneeInputs.with_columns: the same answer, to
every signal's number and sentence, that find_knee gives on the resampled record table.

The confidence takes the table apart once and swaps in each resample's throughput and tail
columns (analysis.knee.confidence.resampled_answers); these tests hold that path to find_knee
over the whole resampled frame, on a sweep with a repeated level (three rows: the fit's grouped
mean goes through pandas) and noise wide enough that the resamples disagree.
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from analysis.knee.confidence import resampled_answers
from analysis.knee.facts import PlateauFact
from analysis.knee.find import KneeInputs, KneeParams, find_knee, judge, judged_max_concurrency
from analysis.knee.fit import Levels
from analysis.stages.array_intervals import cleared, resampled_columns
from analysis.stages.baseline import compute_baseline
from analysis.stages.intervals import StageBatches
from tests.analysis.stages.stdlib_intervals import resampled_tables
from tests.support.knee_frames import drawn_batches, sweep

LEVELS = [2, 4, 6, 8, 8, 8, 10, 12, 16]
TOK = [200.0, 390.0, 560.0, 700.0, 690.0, 710.0, 730.0, 735.0, 740.0]
P95 = [210.0, 220.0, 240.0, 300.0, 310.0, 290.0, 420.0, 520.0, 700.0]


def _noisy() -> tuple[pd.DataFrame, dict[int, StageBatches]]:
    summary = sweep(
        LEVELS, TOK, P95, baseline_tok_s=100.0, baseline_p95_ms=200.0,
        total_tok_s=[t * 3 for t in TOK],
    )  # fmt: skip
    summary.loc[summary["kind"] == "baseline", "total_tok_s"] = 300.0
    batches = drawn_batches(
        summary, np.random.default_rng(3), windows=8, rate_spread=0.12, tail_spread=0.4,
        sizes=lambda _stage: [25] * 8, without=5,
    )  # fmt: skip
    return summary, batches


@pytest.mark.parametrize("column", ["output_tok_s", "total_tok_s"])
def test_each_resample_is_judged_as_find_knee_judges_its_table(column: str) -> None:
    summary, batches = _noisy()
    baseline = compute_baseline(None, summary)
    params = KneeParams(throughput_column=column, fit_resamples=0)
    inputs = KneeInputs(cleared(summary), baseline, params)
    columns = resampled_columns(summary, batches, random.Random(7), column, 40)
    tables = resampled_tables(summary, batches, random.Random(7), column, 40)
    answers = set()
    for r, table in enumerate(tables):
        got = judge(inputs.with_columns({name: v[r].tolist() for name, v in columns.items()}))
        want = find_knee(table, baseline, params=params)
        assert repr(got) == repr(want)  # repr: NaN figures compare equal as text
        answers.add(want.max_concurrency)
    assert len(answers) > 1  # the resamples do disagree, so the comparison says something


def test_the_confidence_answers_are_find_knees_on_the_resampled_tables() -> None:
    summary, batches = _noisy()
    baseline = compute_baseline(None, summary)
    params = KneeParams()
    got = resampled_answers(summary, baseline, batches, random.Random(1), params, 30)
    tables = resampled_tables(summary, batches, random.Random(1), "output_tok_s", 30)
    refit = replace(params, fit_resamples=0)
    assert got == [find_knee(t, baseline, params=refit).max_concurrency for t in tables]


def test_the_fixed_columns_cannot_be_swapped() -> None:
    summary, _ = _noisy()
    inputs = KneeInputs(summary, compute_baseline(None, summary), KneeParams())
    with pytest.raises(ValueError, match="target_users"):
        inputs.with_columns({"target_users": list(range(len(summary)))})


@pytest.mark.parametrize("most", [2, 3, 6])
def test_the_fits_level_means_are_pandas_grouped_means(most: int) -> None:
    rng = np.random.default_rng(most)
    for _ in range(50):
        users = np.repeat(np.arange(1, 9), rng.integers(1, most + 1, 8))  # up to `most` each
        n = len(users)
        values = rng.lognormal(5, 2, n) * rng.choice([1.0, -1.0, 1e-8, 1e8], n)
        values[rng.uniform(size=n) < 0.15] = np.nan
        frame = pd.DataFrame(
            {"kind": "step", "ok": 1, "target_users": users, "x": 1.0, "pct": values}
        )
        levels = Levels(frame, "x")
        want = frame.groupby("target_users")["pct"].mean().reindex(levels.c).to_numpy()
        got = levels.mean(values[levels.positions])
        assert np.array_equal(got, want, equal_nan=True)


def test_the_answer_alone_fits_the_stages_where_the_plateau_makes_the_knee() -> None:
    """The answer alone (the confidence's path) leaves the all-stages fit out unless its
    plateau could make a stage the knee. Here it does: 8 → 12 users gains 0.25× one user's
    rate (not flat by the adjacent rule) but the fit's plateau starts near 9, so 12 is the
    knee (max_concurrency 8); judged without the fit, 16 would be (12)."""
    summary = sweep(
        [2, 4, 8, 12, 16, 24, 32, 48], [200.0, 400.0, 800.0, 900.0, 880.0, 890.0, 900.0, 910.0],
        [210.0, 220.0, 260.0, 600.0, 900.0, 1300.0, 1800.0, 2600.0],
        baseline_tok_s=100.0, baseline_p95_ms=200.0,
    )  # fmt: skip
    inputs = KneeInputs(summary, compute_baseline(None, summary), KneeParams(fit_resamples=0))
    whole = judge(inputs)
    knee = next(v for v in whole.stages if v.verdict == "knee")
    flat = next(s for s in knee.signals if s.name == "throughput_flattening")
    assert (knee.target_users, type(flat.fact)) == (12, PlateauFact)  # the plateau decided
    assert whole.max_concurrency == 8
    assert judged_max_concurrency(inputs) == 8
