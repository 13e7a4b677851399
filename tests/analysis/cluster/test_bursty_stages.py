"""A stage whose tokens came in bursts is left out of the decode line (its gap is no step)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis.cluster.profile import bursty_stages, fit_line


def _points(itl: list[float], tpot: list[float]) -> pd.DataFrame:
    n = len(itl)
    return pd.DataFrame({"stage": range(n), "users": range(1, n + 1), "batch": range(1, n + 1),
                         "itl_p50_ms": itl, "tpot_p50_ms": tpot})  # fmt: skip


@pytest.mark.parametrize(
    ("itl", "tpot", "bursty"),
    [
        ([11.2, 12.0, 14.0, 15.8], [11.0, 12.0, 14.0, 16.0], ()),  # steady: gap ≈ time per token
        ([11.2, 12.0, 6.6, 17.0], [11.0, 12.0, 16.0, 17.9], (2,)),  # fresh #31's hogged stage
        ([0.4, 0.3, 0.5, 0.2], [9.0, 10.0, 11.0, 12.0], (0, 1, 2, 3)),  # a CPU engine's flushes
        ([7.0, 8.4, 9.8, 11.2], [10.0, 12.0, 14.0, 16.0], ()),  # exactly 0.7: still steps
        ([11.2, 12.0, 8.9, 17.0], [11.0, 12.0, 15.7, 17.9], (2,)),  # fresh #40's stage: 0.56
        ([11.2, math.nan, 14.0, 15.8], [11.0, 12.0, math.nan, 16.0], ()),  # not counted: kept
    ],
)
def test_a_gap_well_under_the_time_per_token_is_a_burst(itl, tpot, bursty) -> None:
    assert bursty_stages(_points(itl, tpot)) == bursty


def test_leaving_the_burst_out_gives_back_the_step() -> None:
    """Fresh #31's figures: the line through all six stages read β 0.82 for the simulator's 1.0;
    without the bursty stage it reads the step."""
    batch = [1.0, 1.875, 3.9375, 5.571, 6.6, 7.75]
    itl = [10.0 + 1.0 * b for b in batch]
    itl[3] = 6.6  # the burst
    tilted = fit_line(pd.Series(batch).to_numpy(), pd.Series(itl).to_numpy())
    assert tilted.slope is not None and tilted.slope < 0.9
    kept = [i for i in range(6) if i != 3]
    fit = fit_line(pd.Series([batch[i] for i in kept]).to_numpy(),
                   pd.Series([itl[i] for i in kept]).to_numpy())  # fmt: skip
    assert fit.slope == pytest.approx(1.0) and fit.intercept == pytest.approx(10.0)
