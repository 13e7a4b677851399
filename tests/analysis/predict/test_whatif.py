"""The prediction's interval, its reach beyond the run, and its refusals (synthetic fits)."""

from __future__ import annotations

from dataclasses import replace
from typing import get_args

import pytest

from analysis.model import CannotTell
from analysis.predict.facts import CapacityParams, Estimate, Workload
from analysis.predict.whatif import check_levels, predict
from loadknee_core.knee_params import DEFAULTS
from tests.support.predict_fits import synthetic_fit

X = Estimate.exact


fit_of = synthetic_fit

SLOTS8 = CapacityParams(Estimate(10.0, 9.0, 11.0), Estimate(0.5, 0.4, 0.6), X(0.02), 8.0, None)


def test_exact_parameters_give_an_interval_of_one_level() -> None:
    exact = CapacityParams(X(10.0), X(0.5), X(0.02), 8.0, None)
    p = predict(fit_of(exact), Workload(256, 64))
    assert (p.point.users, p.low, p.high) == (8, 8, 8)
    assert p.refusal is None and not p.extrapolated


def test_a_slot_bound_capacity_does_not_move_with_alpha_and_beta() -> None:
    p = predict(fit_of(SLOTS8), Workload(256, 64))
    assert (p.point.users, p.low, p.high, p.point.bound) == (8, 8, 8, "slots")


def test_uncertain_parameters_widen_a_compute_bound_interval() -> None:
    wide = CapacityParams(Estimate(10.0, 8.0, 12.0), Estimate(0.3, 0.2, 0.4), X(0.0), None, None)
    p = predict(fit_of(wide, max_batch=64.0), Workload(256, 64))
    assert p.point.bound == "compute"
    assert p.low < p.point.users < p.high


def test_a_batch_past_the_measured_ones_is_extrapolated_and_widened() -> None:
    params = CapacityParams(Estimate(10.0, 9.5, 10.5), Estimate(0.3, 0.25, 0.35), X(0.0), None,
                            None)  # fmt: skip
    within = predict(fit_of(params, max_batch=40.0), Workload(256, 64))
    beyond = predict(fit_of(params, max_batch=24.0), Workload(256, 64))
    assert not within.extrapolated and within.widened_by == 1.0
    assert beyond.extrapolated and beyond.widened_by > 1.0 and beyond.refusal is None
    assert beyond.high - beyond.low >= within.high - within.low


def test_beyond_twice_the_measured_batch_it_refuses() -> None:
    params = CapacityParams(X(10.0), X(0.3), X(0.0), None, None)
    p = predict(fit_of(params, max_batch=8.0), Workload(256, 64))
    assert p.refusal == "beyond_measured" and p.low is None and p.check_levels == ()


def test_no_decode_fit_no_number() -> None:
    nan = Estimate(float("nan"), float("nan"), float("nan"))
    p = predict(fit_of(replace(SLOTS8, alpha_ms=nan, beta_ms=nan)), Workload(256, 64))
    assert p.refusal == "no_decode_fit" and p.point is None


@pytest.mark.parametrize("reason", get_args(CannotTell))
def test_a_run_that_cannot_tell_its_capacity_gives_no_number(reason) -> None:
    # the same fit predicts 8 when its run answers: the refusal is the run's doubt, not the fit's
    fit = fit_of(SLOTS8)
    assert predict(fit, Workload(256, 64)).point.users == 8
    doubtful = replace(fit, cannot_tell=reason, measured_capacity=None)
    p = predict(doubtful, Workload(256, 64))
    assert p.refusal == "source_cannot_tell" and p.point is None
    assert (p.low, p.high, p.levels, p.check_levels) == (None, None, (), ())


def test_a_kv_budget_assumed_from_the_knee_spans_slots_and_kv() -> None:
    """No KV gauge: the run cannot tell its 8-sequence limit from a KV budget; at twice the
    output the point reads it as KV (2560 tokens / 384 = 6 sequences), the interval reaches
    the slots (8)."""
    params = replace(SLOTS8, kv_tokens=X(8 * 320.0))
    p = predict(fit_of(params, kv_source="knee_assumed"), Workload(256, 128))
    assert (p.point.users, p.point.bound) == (6, "kv")
    assert (p.low, p.high) == (6, 8)


#: 16 slots and a KV budget of ~10 sequences' held context (288 tokens at 256 + 64) ± 10 %
GAUGED = CapacityParams(X(10.0), X(0.5), X(0.02), 16.0, Estimate(2880.0, 2600.0, 3200.0))


@pytest.mark.parametrize(
    ("kv_source", "threshold", "memory_source", "expected", "limit"),
    [
        # 90 % at 9 users; the drawn budgets move the level it passes 85 % at: 7–9
        ("kv_gauge", 85.0, "auto", (8, "memory", 7, 9), 85.0),
        ("kv_gauge", 85.0, "kv_cache", (8, "memory", 7, 9), 85.0),
        ("kv_gauge", 95.0, "auto", (9, "flattening", 8, 9), 95.0),  # the budget's 9 bind
        ("none", 85.0, "auto", (9, "flattening", 8, 9), None),  # no gauge: no memory predicted
        # the knee told to judge GPU memory alone: the KV use is not what it reads
        ("kv_gauge", 85.0, "gpu", (9, "flattening", 8, 9), None),
    ],
)
def test_the_memory_bound_carries_its_interval_over_the_drawn_budgets(
    kv_source, threshold, memory_source, expected, limit
) -> None:
    knee = replace(DEFAULTS, memory_pressure_pct=threshold, memory_source=memory_source)
    p = predict(fit_of(GAUGED, kv_source=kv_source, max_batch=16.0), Workload(256, 64), knee)
    assert (p.point.users, p.point.ends_with, p.low, p.high) == expected
    assert p.memory_limit == limit
    at = {lv.users: lv.kv_pct for lv in p.levels}
    assert at[9] == (pytest.approx(90.0) if limit is not None else None)


def test_the_check_levels_bracket_the_prediction() -> None:
    assert check_levels(8, 7, 10) == (1, 4, 7, 8, 9, 10, 11, 16)
