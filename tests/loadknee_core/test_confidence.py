"""Table tests for loadknee_core.confidence: t quantiles, batch means, tails (numpy
oracle)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from loadknee_core.confidence import (
    MIN_BATCHES,
    batch_count,
    batch_rates,
    quantile,
    seconds_needed,
    t_quantile,
    tail_interval,
    throughput_interval,
)
from tests.support.kept_out import imports_brought

# Student-t quantiles, printed tables (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2), 3 decimals
T_TABLE = [
    (0.975, 1, 12.706),
    (0.975, 4, 2.776),
    (0.975, 9, 2.262),
    (0.975, 30, 2.042),
    (0.95, 9, 1.833),
    (0.995, 9, 3.250),
    (0.90, 2, 1.886),
    (0.999, 5, 5.893),
]


@pytest.mark.parametrize(("p", "df", "expected"), T_TABLE)
def test_t_quantile_matches_the_printed_table(p: float, df: int, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, abs=6e-4)
    assert t_quantile(1 - p, df) == pytest.approx(-expected, abs=6e-4)


def test_t_quantile_tends_to_the_normal() -> None:
    assert t_quantile(0.975, 100000) == pytest.approx(1.95996, abs=1e-3)


def test_points_give_the_numpy_batch_means_interval() -> None:
    """Without spans each request counts at its end: the interval is numpy's t-interval."""
    rng = np.random.default_rng(7)
    ends = np.sort(rng.uniform(100.0, 160.0, 600))
    tokens = rng.integers(50, 150, 600).astype(float)
    got = throughput_interval(list(ends), list(tokens), 100.0, 160.0, batches=10)
    assert got is not None
    sums = np.array([tokens[(ends >= 100 + 6 * k) & (ends < 106 + 6 * k)].sum() for k in range(10)])
    rates = sums / 6.0
    half = 2.2621571628 * rates.std(ddof=1) / math.sqrt(10)
    assert got.mean == pytest.approx(rates.mean())
    assert got.mean == pytest.approx(tokens.sum() / 60.0)
    assert got.low == pytest.approx(rates.mean() - half, rel=1e-6)
    assert got.high == pytest.approx(rates.mean() + half, rel=1e-6)
    assert got.half_width_pct == pytest.approx(half / rates.mean() * 100, rel=1e-6)
    assert (got.n, got.batches) == (600, 10)


def test_spans_spread_tokens_and_centre_on_the_window_rate() -> None:
    """With spans, the windows' mean is the tokens inside the window over its length."""
    # a 1 s request half before the window: only its 5 tokens inside count
    rates = batch_rates([0.5, 9.0], [10.0, 4.0], 0.0, 10.0, starts_s=[-0.5, 8.0], batches=5)
    assert rates == pytest.approx([2.5, 0.0, 0.0, 0.0, 2.0])
    assert rates is not None
    assert sum(rates) / 5 == pytest.approx((5.0 + 4.0) / 10.0)
    # two 1 s requests each straddling a window edge (window 0..10, edges every 2 s)
    rates = batch_rates([2.5, 6.0], [10.0, 20.0], 0.0, 10.0, starts_s=[1.5, 5.0], batches=5)
    assert rates == pytest.approx([2.5, 2.5, 10.0, 0.0, 0.0])


@pytest.mark.parametrize(
    ("window_s", "span_s", "batches", "expected"),
    [
        (60.0, 1.0, 10, 10),  # long window: the asked count
        (60.0, 10.0, 10, 6),  # windows at least one request long
        (20.0, 5.0, 10, 4),  # too short: below MIN_BATCHES
        (2.0, 3.8, 10, 0),  # the README's quick form at 64 users: window shorter than a request
    ],
)
def test_batch_count_keeps_windows_at_least_one_request_long(
    window_s: float, span_s: float, batches: int, expected: int
) -> None:
    starts = [0.0, 1.0, 2.0]
    ends = [s + span_s for s in starts]
    assert batch_count(0.0, window_s, starts_s=starts, ends_s=ends, batches=batches) == expected


def test_too_little_data_is_none_never_a_fake_interval() -> None:
    starts = [float(i) for i in range(10)]
    ends = [s + 3.8 for s in starts]
    assert throughput_interval(ends, [100.0] * 10, 0.0, 2.0, starts_s=starts) is None
    assert throughput_interval([1.0, 2.0], [5.0, 5.0], 0.0, 10.0, batches=MIN_BATCHES - 1) is None
    # a tail needs 20 values (and at least 1/(1-q) for the percentile asked)
    assert tail_interval([float(i) for i in range(19)], [1.0] * 19, 0.0, 20.0) is None
    assert tail_interval([i / 10 for i in range(60)], [1.0] * 60, 0.0, 6.0, q=0.99) is None


def test_steady_data_gives_a_narrow_interval_and_noisy_data_a_wide_one() -> None:
    rng = random.Random(3)
    ends = sorted(rng.uniform(0, 100) for _ in range(2000))
    steady = throughput_interval(ends, [100.0] * 2000, 0.0, 100.0)
    # a slow spell: half the window served at a tenth of the rate
    thinned = [e for e in ends if e < 50 or rng.random() < 0.1]
    noisy = throughput_interval(thinned, [100.0] * len(thinned), 0.0, 100.0)
    assert steady is not None and noisy is not None
    assert steady.half_width_pct < 10 < noisy.half_width_pct
    assert steady.low < 2000.0 < steady.high


def test_batch_means_cover_the_truth_of_a_correlated_stream() -> None:
    """An AR(1)-modulated rate: batch-means intervals cover the true mean about 95 % of the time
    (a naive per-request interval would not; checked as its miss rate being far higher)."""
    covered = 0
    trials = 200
    for seed in range(trials):
        rng = random.Random(seed)
        level, ends, tokens, t = 0.0, [], [], 0.0
        while t < 200.0:
            level = 0.9 * level + rng.gauss(0, 0.3)  # slow spells that last several requests
            t += 0.1
            ends.append(t)
            tokens.append(100.0 * math.exp(level) / math.exp(0.3**2 / (2 * (1 - 0.81))))
        got = throughput_interval(ends, tokens, 0.0, 200.0, batches=10)
        assert got is not None
        covered += got.low <= 1000.0 <= got.high
    assert 0.88 * trials <= covered <= 0.99 * trials


def test_tail_interval_is_the_numpy_percentile_inside_a_bootstrap_band() -> None:
    rng = np.random.default_rng(11)
    ends = np.sort(rng.uniform(0, 120, 800))
    e2e = rng.lognormal(7.0, 0.4, 800)
    got = tail_interval(list(ends), list(e2e), 0.0, 120.0, q=0.95, resamples=400, seed=1)
    assert got is not None
    assert got.mean == pytest.approx(np.percentile(e2e, 95))
    assert got.low < got.mean < got.high
    # the band is about the percentile's sampling spread: between 1 % and 20 % of it here
    assert 1.0 < got.half_width_pct < 20.0
    again = tail_interval(list(ends), list(e2e), 0.0, 120.0, q=0.95, resamples=400, seed=1)
    assert again == got


@pytest.mark.parametrize("q", [0.0, 0.5, 0.95, 0.99, 1.0])
def test_quantile_is_numpy_linear(q: float) -> None:
    values = [5.0, 1.0, 9.0, 3.0, 3.0, 12.5, 7.0]
    assert quantile(values, q) == pytest.approx(float(np.percentile(values, q * 100)))


def test_seconds_needed_scales_with_the_square_of_the_width() -> None:
    rng = random.Random(5)
    got = throughput_interval(
        [float(i) for i in range(100)], [rng.uniform(1, 3) for _ in range(100)], 0.0, 100.0
    )
    assert got is not None
    need = seconds_needed(got, 100.0, target_pct=got.half_width_pct / 2)
    assert need == pytest.approx(400.0)
    assert seconds_needed(got, 100.0, target_pct=got.half_width_pct * 2) == 100.0


def test_module_imports_nothing_heavy() -> None:
    assert imports_brought("loadknee_core.confidence", "numpy,pandas,locust,gevent") == []
