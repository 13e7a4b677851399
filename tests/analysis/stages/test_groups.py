"""Per-stage percentiles on arrays (analysis.stages.groups) against pandas' groupby.quantile,
to the last bit: the record table's figures must not move."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.stages.groups import StageGroups, median, rank_quantiles

QS = (0.0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0)


def _pandas(keys: np.ndarray, values: np.ndarray, qs: tuple[float, ...]) -> pd.DataFrame:
    return pd.Series(values).groupby(keys).quantile(np.array(qs)).unstack()


@pytest.mark.parametrize(
    ("sizes", "nan_share", "seed"),
    [
        ((1,), 0.0, 0),  # one value: every percentile is it
        ((2,), 0.0, 1),
        ((3, 7, 20), 0.0, 2),
        ((101, 1000, 1), 0.1, 3),  # NaN values left out, as pandas does
        ((5000, 12345), 0.01, 4),
        ((10, 10, 10, 10), 0.5, 5),
    ],
)
def test_group_quantiles_are_pandas_bit_for_bit(
    sizes: tuple[int, ...], nan_share: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    keys = np.concatenate([np.full(n, float(k * 2 + 1)) for k, n in enumerate(sizes)])
    rng.shuffle(keys)  # the groups' rows interleaved, as stages are not in a real file
    values = rng.lognormal(5.0, 1.0, len(keys))
    values[rng.uniform(size=len(keys)) < nan_share] = np.nan
    groups = StageGroups(keys)
    got = groups.quantiles(values, QS)
    want = _pandas(keys, values, QS)
    assert groups.labels.tolist() == want.index.tolist()
    np.testing.assert_array_equal(got, want.to_numpy())


def test_ties_and_a_group_of_only_nan() -> None:
    keys = np.array([1.0, 1.0, 1.0, 2.0, 2.0, 3.0])
    values = np.array([5.0, 5.0, 7.0, np.nan, np.nan, 4.0])
    got = StageGroups(keys).quantiles(values, (0.5, 0.95))
    np.testing.assert_array_equal(got, _pandas(keys, values, (0.5, 0.95)).to_numpy())
    assert np.isnan(got[1]).all()  # pandas: NaN for a group with no value


def test_rows_without_a_key_are_in_no_group() -> None:
    keys = np.array([np.nan, 2.0, 0.0, np.nan, 2.0])
    groups = StageGroups(keys)
    assert groups.labels.tolist() == [0.0, 2.0]
    assert groups.order.tolist() == [2, 1, 4]  # by key, rows in their order within a key
    assert groups.bounds.tolist() == [0, 1, 3]
    code = np.array([3, 1, 1, 0, 2])
    assert groups.counts(code, 4).tolist() == [[0, 1, 0, 0], [0, 1, 1, 0]]


@pytest.mark.parametrize(
    ("values", "qs", "expected"),
    [
        ([], (0.5,), [math.nan]),
        ([3.0], (0.0, 0.5, 1.0), [3.0, 3.0, 3.0]),
        ([1.0, 2.0], (0.5,), [1.5]),
        ([4.0, 1.0, 3.0, 2.0], (0.0, 1 / 3, 1.0), [1.0, 2.0, 4.0]),
        ([10.0, 0.0], (0.95,), [9.5]),
    ],
)
def test_rank_quantiles(values: list[float], qs: tuple[float, ...], expected: list) -> None:
    got = rank_quantiles(np.array(values), qs)
    want = pd.Series(values, dtype=float).quantile(list(qs)).tolist() if values else expected
    assert got == pytest.approx(expected, nan_ok=True)
    assert got == pytest.approx(want, nan_ok=True)


@pytest.mark.parametrize(
    ("n", "nans", "seed"),
    [(1, 0, 0), (2, 0, 1), (7, 0, 2), (20000, 0, 3), (20001, 0, 4), (100, 1, 5), (0, 0, 6)],
)
def test_median_is_numpys_to_the_bit(n: int, nans: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = np.round(rng.lognormal(5.0, 0.4, n), 1)  # rounded: ties among the middle values
    values[:nans] = np.nan
    got = median(values)
    if n == 0:
        assert math.isnan(got)
        return
    want = float(np.median(values))
    assert (math.isnan(got) and math.isnan(want)) or got == want
