"""A stage that served well under what a stage running no more did is left out of the decode line:
its server waited for CPU, so its time per token is the machine's."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.cluster.profile import fit_line, starved_stages

#: ci96's cluster sweep (the 8-slot simulator, step 10 + 1 ms × batch, on a busy CI machine)
BATCH = [0.958, 2.0, 4.0, 5.6, 7.5, 8.0]
TPOT = [10.84, 11.94, 14.12, 15.92, 18.07, 24.80]
SERVED = [85.7, 155.7, 271.3, 352.1, 426.3, 199.6]


def _points(batch: list[float], served: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"stage": range(len(batch)), "batch": batch, "output_tok_s": served})


@pytest.mark.parametrize(
    ("batch", "served", "starved", "why"),
    [
        (BATCH, SERVED, (5,), "8 running served 200 tok/s where 7.5 served 426"),
        (
            [1.0, 2.0, 4.0, 8.0, 8.0],
            [90.0, 170.0, 300.0, 430.0, 420.0],
            (),
            "flat at the slots within 2 %: the plateau, not a starved server",
        ),
        (
            [1.0, 2.0, 4.0, 8.0, 8.0],
            [90.0, 170.0, 300.0, 430.0, 365.0],
            (4,),
            "just under 85 % of 430",
        ),
        (
            [1.0, 2.0, 4.0, 8.0, 8.0],
            [90.0, 170.0, 300.0, 430.0, 366.0],
            (),
            "just over 85 % of 430",
        ),
        (
            [1.0, 4.0, 2.0],
            [90.0, 300.0, 200.0],
            (),
            "fewer running serve less: only a stage running no more counts",
        ),
        (
            [1.0, 2.0, 4.0],
            [90.0, math.nan, 70.0],
            (2,),
            "an unmeasured stage neither hides a starved one nor is one",
        ),
    ],
)
def test_serving_less_at_no_smaller_batch_is_starved(batch, served, starved, why) -> None:
    assert starved_stages(_points(batch, served)) == starved, why


def test_leaving_the_starved_stage_out_gives_back_the_step() -> None:
    x, y = np.array(BATCH), np.array(TPOT)
    tilted = fit_line(x, y)
    assert tilted.intercept == pytest.approx(8.44, abs=0.01)
    assert tilted.slope == pytest.approx(1.605, abs=0.001)
    kept = fit_line(x[:-1], y[:-1])
    assert kept.intercept == pytest.approx(9.74, abs=0.01)  # the simulator's 10
    assert kept.slope == pytest.approx(1.106, abs=0.001)  # its 1.0 plus prefills and a busy host
