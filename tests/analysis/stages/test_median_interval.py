"""The median's order-statistic interval: the sign test's ranks, their coverage, and the record
table's columns from a run's own rows."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from analysis.inputs.load import read_run
from analysis.pipeline import analyze_run
from analysis.stages.median_interval import EXACT_UP_TO, median_interval, median_ranks
from analysis.stages.row_classes import OK
from analysis.stages.summary import measured_codes, measured_requests

RECORDED = Path(__file__).parents[2] / "support" / "data" / "sim_runs" / "compute-bound-lognormal"


def _coverage(n: int, j: int) -> float:
    """P(x_(j) <= median <= x_(n-j+1)): 1 - 2 P(Binomial(n, 1/2) < j)."""
    return 1.0 - 2.0 * sum(math.comb(n, i) for i in range(j)) / 2**n


@pytest.mark.parametrize(
    ("n", "ranks"),
    [
        (5, None),  # even the extremes cover only 93.8 %
        (6, (1, 6)),  # 96.9 %
        (10, (2, 9)),  # the sign test's table: 97.9 %
        (20, (6, 15)),  # 95.9 %
        (44, (16, 29)),
        (100, (40, 61)),  # 96.5 %
    ],
)
def test_the_ranks_are_the_sign_tests(n, ranks):
    assert median_ranks(n) == ranks


@pytest.mark.parametrize("n", [6, 7, 13, 31, 44, 99, 250, EXACT_UP_TO])
def test_the_ranks_cover_95_pct_and_one_rank_narrower_would_not(n):
    j, k = median_ranks(n)
    assert k == n - j + 1
    assert _coverage(n, j) >= 0.95
    assert _coverage(n, j + 1) < 0.95


def test_past_the_exact_range_the_normal_ranks_continue_the_exact_ones():
    exact, approx = median_ranks(EXACT_UP_TO), median_ranks(EXACT_UP_TO + 1)
    assert approx[0] - exact[0] in (0, 1)
    assert approx[0] == math.floor(
        (EXACT_UP_TO + 1) / 2 - 1.959964 * math.sqrt(EXACT_UP_TO + 1) / 2
    )


def test_the_interval_is_two_of_the_values_around_their_median():
    values = np.array([5.0, 1.0, np.nan, 9.0, 3.0, 7.0, 2.0, 8.0, 4.0, 6.0, 10.0])
    assert median_interval(values) == (2.0, 9.0)  # 10 values: ranks 2 and 9
    assert median_interval(np.array([1.0, 2.0, 3.0, 4.0, np.nan])) is None


def test_the_record_table_carries_each_stages_median_interval():
    run = read_run(RECORDED)
    rows = measured_requests(run)
    ok = rows[measured_codes(rows) == OK]
    summary = analyze_run(RECORDED).summary
    checked = 0
    for record in summary.itertuples():
        e2e = ok.loc[ok["stage"] == record.stage, "e2e_ms"].to_numpy(dtype=float)
        want = median_interval(e2e)
        if want is None:
            assert math.isnan(record.e2e_p50_low_ms)
            continue
        assert (record.e2e_p50_low_ms, record.e2e_p50_high_ms) == pytest.approx(want)
        assert record.e2e_p50_low_ms <= record.e2e_p50_ms <= record.e2e_p50_high_ms
        checked += 1
    assert checked >= 4
