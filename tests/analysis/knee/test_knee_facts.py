"""The knee's signals as facts: for one stage's figures, each signal's kind, values, threshold
and rule (the words are pinned only by tests/analysis/report/test_golden_knee_words.py)."""

from __future__ import annotations

import dataclasses
from typing import get_args

import pytest

from analysis import rules
from analysis.knee import facts
from analysis.knee.client_signals import client_saturation_signal, cross_check, starved
from analysis.knee.signals import (
    StageContext,
    error_signals,
    memory_signals,
    noise_signal,
    tail_signals,
    throughput_signals,
)
from analysis.model import Signal
from loadknee_core.knee_params import KneeParams

ROW = {"stage": 3, "target_users": 16, "batch_size": 1, "ok": 100, "errors": 0, "requests": 100}


def _ctx(**kw) -> StageContext:
    params = kw.pop("params", KneeParams())
    return StageContext(**{"x1": 100.0, "base_tail_ms": 200.0, "tail_percentile": "p95",
                           "gpu_flat": False, "params": params, **kw})  # fmt: skip


@pytest.mark.parametrize(
    ("row", "ctx", "source", "peak", "pressure", "risk"),
    [
        ({"kv_cache_peak_pct": 88.0, "gpu_mem_peak_pct": 70.0}, {}, "kv_cache", 88.0, True, False),
        ({"kv_cache_peak_pct": 60.0, "gpu_mem_peak_pct": 96.0}, {}, "gpu", 96.0, True, True),
        ({"kv_cache_peak_pct": 60.0, "gpu_mem_peak_pct": 96.0}, {"gpu_flat": True},
         "kv_cache", 60.0, False, False),
        ({"gpu_mem_peak_pct": 90.0}, {"gpu_flat": True, "gpu_preallocated": True},
         "gpu_preallocated", None, False, False),
        ({"kv_cache_peak_pct": 60.0, "gpu_mem_peak_pct": 96.0},
         {"params": KneeParams(memory_source="kv_cache")}, "kv_cache", 60.0, False, False),
    ],
)  # fmt: skip
def test_memory_facts_name_the_figure_read_and_the_threshold(
    row, ctx, source, peak, pressure, risk
):
    p, r, _ = memory_signals({**ROW, **row}, None, _ctx(**ctx))
    assert (p.fact.kind, p.fact.source, p.fact.peak_pct) == ("memory_pressure", source, peak)
    assert (r.fact.kind, r.fact.source, r.fact.peak_pct) == ("oom_risk", source, peak)
    assert (p.fired, r.fired) == (pressure, risk)
    assert (p.fact.threshold_pct, r.fact.threshold_pct) == (85.0, 95.0)


def test_oom_and_an_oom_crash_are_two_kinds():
    _, _, oom = memory_signals({**ROW, "gpu_mem_peak_pct": 99.5, "errors": 7}, None, _ctx())
    assert oom.fired and (oom.fact.kind, oom.fact.failed, oom.fact.threshold_pct) == ("oom", 7, 99)
    prev = {**ROW, "gpu_mem_peak_pct": 90.0}
    _, _, crash = memory_signals({**ROW, "gpu_mem_peak_pct": 3.0, "errors": 7}, prev, _ctx())
    assert crash.fired and crash.fact.kind == "oom_crash"
    assert (crash.fact.gpu_before_pct, crash.fact.gpu_peak_pct) == (90.0, 3.0)


@pytest.mark.parametrize(
    ("errors", "success", "some", "red"), [(0, 100.0, False, False), (2, 98.0, True, False),
                                           (20, 80.0, True, True)]
)  # fmt: skip
def test_error_facts_count_the_failures_against_the_red_line(errors, success, some, red):
    row = {**ROW, "ok": 100 - errors, "errors": errors, "success_pct": success}
    any_error, rate = error_signals(row, _ctx())
    assert (any_error.fired, rate.fired) == (some, red)
    assert (rate.fact.kind, rate.fact.failed, rate.fact.served) == ("error_rate", errors, 100)
    assert rate.fact.success_pct == success and rate.fact.threshold_pct == 5.0
    assert any_error.fact.kind == "errors" and rate.value == pytest.approx(100 - success)


@pytest.mark.parametrize(
    ("row", "kind", "fired", "width"),
    [
        ({}, "no_interval", False, None),
        ({"interval_batches": 0, "window_s": 2.0}, "window_too_short", True, None),
        ({"interval_batches": 12, "output_tok_s_hw_pct": 4.0}, "interval", False, 4.0),
        ({"interval_batches": 12, "output_tok_s_hw_pct": 14.0}, "interval", True, 14.0),
    ],
)
def test_noise_facts(row, kind, fired, width):
    noisy = noise_signal({**ROW, **row}, _ctx())
    assert (noisy.fact.kind, noisy.fired) == (kind, fired)
    assert noisy.threshold == 10.0
    if kind != "no_interval":
        assert (noisy.fact.width_pct, noisy.fact.max_pct, noisy.fact.target_pct) == (width, 10, 5)


@pytest.mark.parametrize(
    ("row", "kind", "fired", "share"),
    [
        ({}, "no_in_flight", False, None),
        ({"client_in_flight": 15.2}, "in_flight", False, 0.95),
        ({"client_in_flight": 10.0}, "in_flight", True, 0.625),
        ({"client_in_flight": 10.0, "errors": 3}, "in_flight_after_errors", False, 0.625),
    ],
)
def test_in_flight_facts(row, kind, fired, share):
    signal = starved({**ROW, **row})
    assert (signal.fact.kind, signal.fired, signal.value) == (kind, fired, share)
    assert signal.threshold == 0.9


def test_tail_and_sla_facts_carry_the_yardstick_and_its_source():
    row = {**ROW, "e2e_p95_ms": 600.0, "e2e_p95_low_ms": 540.0}
    ctx = _ctx(params=KneeParams(sla_ms=500.0), tail_source="one_user_level")
    tail, sla = tail_signals(row, ctx)
    assert (tail.fact.tail, tail.fact.base_tail, tail.fact.source) == (600, 200, "one_user_level")
    assert (tail.fact.ratio, tail.fact.lower_ratio, tail.fact.outcome) == (3.0, 2.7, "departed")
    assert sla.fired and (sla.fact.tail_ms, sla.fact.threshold_ms) == (600.0, 500.0)


def test_gain_facts_without_an_earlier_stage_hold_no_figures():
    flat, narrowing = throughput_signals({**ROW, "output_tok_s": 900.0}, None, _ctx())
    assert flat.fact == facts.GainFact("flattening", "output_tok_s", 0.15)
    assert narrowing.fact == facts.GainFact("narrowing", "output_tok_s", 0.5)
    assert not flat.fired and not narrowing.fired


@pytest.mark.parametrize(
    ("share", "waiting", "fired", "needed"),
    [
        (0.0, 0.8, False, 1.0),  # no late request: short waits must add up to a whole request
        (0.0, 1.0, True, 1.0),
        (5.0, 0.59, False, 1.0),  # a few stragglers (a busy client at a refusal limit): no group
        (20.0, 0.8, False, 1.0),
        (20.0, 1.2, True, 1.0),
        (25.0, 0.5, True, 0.5),  # a group: half a request waiting is a queue
        (73.0, 0.6, True, 0.5),  # llama-server, 8 slots, 9 users
        (100.0, 0.4, False, 0.5),
    ],
)
def test_client_queue_takes_late_requests_as_a_group_from_a_quarter(share, waiting, fired, needed):
    row = {**ROW, "client_running": 8.0, "client_waiting": waiting, "client_wait_share_pct": share}
    queue = client_saturation_signal(row, _ctx(client_slots=8.0))
    assert (queue.fired, queue.fact.threshold_waiting) == (fired, needed)


def test_client_queue_needs_twice_the_waiting_without_late_requests():
    row = {**ROW, "client_running": 8.0, "client_waiting": 0.8, "client_wait_share_pct": 0.0}
    queue = client_saturation_signal(row, _ctx(client_slots=8.0))
    assert not queue.fired and queue.fact.threshold_waiting == 1.0
    queue = client_saturation_signal({**row, "client_wait_share_pct": 40.0}, _ctx(client_slots=8))
    assert queue.fired and queue.fact.threshold_waiting == 0.5
    assert (queue.fact.running, queue.fact.in_flight, queue.fact.slots) == (8.0, 16.0, 8)
    assert client_saturation_signal(ROW, _ctx()).fact.kind == "no_client_queue"


@pytest.mark.parametrize(
    ("gauge", "server", "client", "expected"),
    [
        (8.0, True, True, None),
        (10.0, True, True, (True, None)),
        (8.0, True, False, (False, True)),
        (10.0, False, True, (True, False)),
    ],
)
def test_the_gauge_check_keeps_what_disagrees(gauge, server, client, expected):
    row = {**ROW, "running_mean": gauge, "client_running": 8.0}
    said = Signal("server_saturated", server, 1.0, 1.0)
    seen = Signal("client_saturated", client, 1.0, 0.5)
    check = cross_check(row, said, seen)
    assert (None if check is None else (check.running_off, check.server_saturated)) == expected


def test_every_fact_names_a_rule_of_the_method_and_reads_back_from_its_json():
    kinds = (*get_args(facts.SignalFact), facts.GaugeCheckFact)
    for cls in kinds:
        rule = next((f.default for f in dataclasses.fields(cls) if f.name == "rule"), None)
        assert rule is None or rule in rules.RULES, cls
    fact = facts.TailFact("tail", "p95", "e2e", 1.0, 2.0, "baseline", 0.5, None, 2.0, "held")
    assert facts.fact_from_dict(dataclasses.asdict(fact)) == fact


@pytest.mark.parametrize(
    ("tail", "low", "high", "base_low", "outcome", "upper"),
    [
        # past the limit even at the interval's low end: departed
        (600.0, 540.0, 660.0, 180.0, "departed", 660 / 180),
        # past the limit at the point, not at the low end: undecided (as before)
        (420.0, 300.0, 500.0, 190.0, "undecided", 500 / 190),
        # below the limit, both tails tight: held
        (300.0, 280.0, 320.0, 190.0, "held", 320 / 190),
        # below the limit at the point, but the yardstick's own low end (an inflated 1-user
        # tail on a busy machine) puts the high end past it: undecided, never "held"
        (198.0, 150.0, 240.0, 60.0, "undecided", 240 / 60),
        # without the yardstick's interval, the point figure and the stage's own interval decide
        (198.0, 150.0, 240.0, None, "held", None),
    ],
)  # fmt: skip
def test_the_tail_is_held_only_when_its_whole_interval_is_below_the_limit(
    tail, low, high, base_low, outcome, upper
):
    row = {**ROW, "e2e_p95_ms": tail, "e2e_p95_low_ms": low, "e2e_p95_high_ms": high}
    departed, _ = tail_signals(row, _ctx(base_tail_low_ms=base_low))
    assert departed.fact.outcome == outcome
    assert departed.fact.upper_ratio == (None if upper is None else pytest.approx(upper))
    assert departed.fired is (outcome == "departed")
