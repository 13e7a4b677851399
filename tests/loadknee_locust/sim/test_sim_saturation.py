"""The saturation model: pure table tests (the measured sweep of the real simulator is a timing
check: tests/loadknee_locust/sim/test_sim_saturation_measured.py)."""

from __future__ import annotations

import inspect
import math

import pytest

from loadknee_core.knee_params import KneeParams
from loadknee_locust.sim.params import preset
from loadknee_locust.sim.saturation import (
    compute_limit,
    expected_throughput,
    kv_limit,
    predicted_knee_level,
    saturation_concurrency,
)

COMPUTE_BOUND = preset("fast", max_num_seqs=64, decode_per_seq_ms=5.0, prefill_ms_per_token=0.0)


@pytest.mark.parametrize(
    ("params", "io", "c_star", "limit"),
    [
        (preset("fast"), (32, 64), 8.0, "slots"),
        (preset("gpu-like"), (128, 128), 48.0, "slots"),
        (preset("gpu-like"), (512, 256), 18.0, "kv"),  # 14336 // 768
        (preset("kv-tight"), (128, 128), 8.0, "kv"),  # 2048 // 256
        (preset("kv-tight"), (512, 256), 2.0, "kv"),
        # a = 10, k = 5: (sqrt(10 × 15 / 0.1) − 10) / 5
        (COMPUTE_BOUND, (32, 64), (math.sqrt(1500) - 10) / 5, "compute"),
    ],
)
def test_saturation_concurrency(params, io, c_star, limit) -> None:
    assert saturation_concurrency(params, *io) == pytest.approx(c_star)
    limits = {
        "slots": params.max_num_seqs,
        "kv": kv_limit(params, *io),
        "compute": compute_limit(params, *io),
    }
    assert min(limits, key=lambda name: limits[name]) == limit


def test_compute_limit_is_where_the_marginal_gain_is_a_tenth() -> None:
    p, io = COMPUTE_BOUND, (32, 64)
    b = compute_limit(p, *io)
    lone = expected_throughput(p, 1, *io) * (64.5 / 64)  # without the admission wait
    eps = 1e-4
    slope = (expected_throughput(p, b + eps, *io) - expected_throughput(p, b - eps, *io)) / (
        2 * eps
    )
    assert slope * (64.5 / 64) / lone == pytest.approx(0.1, rel=1e-3)


def test_expected_throughput_rises_then_stays_flat() -> None:
    p = preset("fast")
    curve = [expected_throughput(p, c, 32, 64) for c in (1, 2, 4, 8, 16, 64)]
    assert curve == sorted(curve)
    assert curve[-1] == curve[-2]  # queueing adds nothing
    assert curve[0] == pytest.approx(1000 * 64 / (64.5 * (10 + 0.5 + 32 * 0.02 / 64)))
    assert expected_throughput(p, 0, 32, 64) == 0.0


@pytest.mark.parametrize(
    ("params", "io", "levels", "knee"),
    [
        (preset("fast"), (256, 64), [1, 2, 4, 8, 16, 32], 16),  # the demo: c* = 8 is tested
        (preset("fast"), (256, 64), [32, 16, 8, 4, 2, 1], 16),  # order does not matter
        (preset("fast"), (256, 64), [4, 8, 16], 16),  # the first step is measured from 1 user
        (preset("fast"), (256, 64), [1, 2, 4, 8], None),  # at c*, not beyond it
        # c* = 44 between 32 and 48: 32 → 48 still gains 0.20 of a lone user each (measured 0.21)
        (preset("gpu-like"), (256, 64), [1, 2, 4, 8, 16, 32, 48, 64], 64),
        (preset("gpu-like"), (256, 64), [1, 2, 4, 8, 16, 32, 44, 64], 64),
        (preset("gpu-like"), (256, 64), [1, 8, 44, 48], 48),  # the level before reaches c*
        (preset("fast"), (32, 64), [1, 4, 16, 64], 64),  # 4 → 16 gains 0.21 each: not flat yet
        (preset("fast"), (32, 64), [1, 2], None),
    ],
)
def test_predicted_knee_level(params, io, levels, knee) -> None:
    assert predicted_knee_level(params, levels, *io) == knee


def test_the_flat_threshold_is_the_analysis_default() -> None:
    """The prediction's default is the analysis's own, and the setting is honoured."""
    default = inspect.signature(predicted_knee_level).parameters["flat_gain_ratio"].default
    assert default == KneeParams().flat_gain_ratio
    p, levels = preset("fast"), (1, 2, 4, 8, 16, 24, 32, 48, 64)
    strict = predicted_knee_level(p, levels, 128, 64, flat_gain_ratio=0.9)
    assert strict is not None and strict < (predicted_knee_level(p, levels, 128, 64) or math.inf)


def test_bad_lengths() -> None:
    with pytest.raises(ValueError):
        saturation_concurrency(preset("fast"), 10, 0)
