"""find_knee on record tables typed in as data: the vLLM source's record table (docs/method.md)
and one table per rule."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import pytest

from analysis.advice.recommend import recommend
from analysis.knee.find import KneeParams, find_knee
from analysis.stages.baseline import compute_baseline
from tests.support.knee_frames import NAN, SEED_002_TABLE, frame, seed_002_summary, stage, sweep


def _knee(summary, **params):
    baseline = compute_baseline(None, summary)
    return find_knee(summary, baseline, params=KneeParams(**params))


def _verdicts(result):
    return [v.verdict for v in result.stages]


def _signal(verdict, name):
    return next(s for s in verdict.signals if s.name == name)


def test_seed_002_table_gives_its_verdicts_and_watermark():
    summary = seed_002_summary()
    result = _knee(summary)
    assert _verdicts(result) == [row[-1] for row in SEED_002_TABLE]
    assert (result.knee_users, result.red_line_users) == (32, 48)
    assert result.max_concurrency == 24  # the stage before the knee
    assert result.base_capacity == 24  # tail fine, memory <= 85 %, 100 % success
    recs = recommend(summary, result, compute_baseline(None, summary))
    assert recs.get("production_watermark") == [16, 19]
    assert recs.get("max_concurrency") == 24


def test_seed_002_reasons_carry_the_numbers():
    result = _knee(seed_002_summary())
    critical, knee, red = result.stages[2], result.stages[3], result.stages[4]
    narrowing = _signal(critical, "gain_narrowing")
    assert narrowing.fired and narrowing.fact.kind == "narrowing" and narrowing.fact.below
    assert round(narrowing.fact.gain_ratio * 100) == 27 and narrowing.fact.threshold_ratio == 0.5
    tail = _signal(critical, "tail_departure")
    assert tail.fired and round(tail.fact.ratio, 1) == 2.8 and tail.fact.outcome == "departed"
    assert narrowing in critical.reasons and tail in critical.reasons
    flat = _signal(knee, "throughput_flattening")
    assert (flat.fact.prev_users, flat.fact.users) == (24, 32)
    assert flat.fact.rate > flat.fact.prev_rate
    assert round(flat.fact.gain_ratio * 100) == 7 and flat.fact.below
    tail = _signal(knee, "tail_departure")
    assert tail.fact.ratio == pytest.approx(9.0) and tail.fact.source == "baseline"
    assert knee.reasons[:2] == (flat, tail)
    rate = _signal(red, "error_rate")
    assert rate.fired and rate.fact.success_pct == pytest.approx(80.0) and rate.threshold == 5.0
    oom = _signal(red, "oom")
    assert oom.fired and (oom.fact.kind, oom.fact.failed) == ("oom", 200)
    assert red.reasons[:2] == (oom, rate)  # the red line's causes, most severe first
    assert (result.knee_users, result.red_line_users) == (32, 48)


def test_marginal_gain_separates_stages_that_scaling_efficiency_cannot():
    rows = {users: (tok, users) for users, _, _, tok, *_ in SEED_002_TABLE}
    efficiency = [
        (rows[b][0] / rows[a][0]) / (b / a) for a, b in ((16, 24), (24, 32))
    ]  # plain scaling efficiency: 0.77 and 0.78, too close to tell apart
    assert efficiency == pytest.approx([0.772, 0.776], abs=0.01)
    result = _knee(seed_002_summary())
    gains = [
        next(s.value for s in v.signals if s.name == "throughput_flattening")
        for v in result.stages[2:4]
    ]
    assert gains == pytest.approx([0.273, 0.068], abs=0.005)


LEVELS = [2, 4, 8, 16]


def _scaling(**columns):
    """Throughput doubling with the users at the baseline's latency, plus ``columns``."""
    return sweep(
        LEVELS, [200, 400, 800, 1600], [100] * 4, baseline_tok_s=100.0, baseline_p95_ms=100.0,
        **columns,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("name", "tok_s", "p95", "extra", "params", "expected"),
    [
        ("linear scaling", [200, 400, 800, 1600], [100, 100, 105, 110], {}, {},
         ["comfortable"] * 4),
        ("flat + tail departed = knee", [200, 400, 800, 820], [100, 100, 110, 250], {}, {},
         ["comfortable", "comfortable", "comfortable", "knee"]),
        ("flat but tail fine = critical", [200, 400, 800, 820], [100, 100, 110, 150], {}, {},
         ["comfortable", "comfortable", "comfortable", "critical"]),
        ("tail departed, still scaling = critical", [200, 400, 800, 1600], [100, 100, 110, 300],
         {}, {}, ["comfortable", "comfortable", "comfortable", "critical"]),
        ("gain narrowing = critical", [200, 400, 800, 1000], [100, 100, 110, 120], {}, {},
         ["comfortable", "comfortable", "comfortable", "critical"]),
        ("SLA exceeded = critical", [200, 400, 800, 1600], [100, 100, 110, 180], {},
         {"sla_ms": 150}, ["comfortable", "comfortable", "comfortable", "critical"]),
        ("p99 chosen", [200, 400, 800, 820], [100, 100, 110, 120],
         {"e2e_p99_ms": [100, 100, 110, 400]}, {"tail_percentile": "p99"},
         ["comfortable", "comfortable", "comfortable", "knee"]),
        ("memory 85 % = critical", [200, 400, 800, 1600], [100] * 4,
         {"gpu_mem_peak_pct": [50, 60, 70, 86]}, {},
         ["comfortable", "comfortable", "comfortable", "critical"]),
        ("a few errors = critical", [200, 400, 800, 1600], [100] * 4,
         {"ok": [1000, 1000, 1000, 990], "errors": [0, 0, 0, 10]}, {},
         ["comfortable", "comfortable", "comfortable", "critical"]),
        ("errors past the limit = red line", [200, 400, 800, 1600], [100] * 4,
         {"ok": [1000, 1000, 1000, 900], "errors": [0, 0, 0, 100]}, {},
         ["comfortable", "comfortable", "comfortable", "red_line"]),
        ("strict: any error = red line", [200, 400, 800, 1600], [100] * 4,
         {"ok": [1000, 1000, 1000, 999], "errors": [0, 0, 0, 1]}, {"red_line_error_pct": 0},
         ["comfortable", "comfortable", "comfortable", "red_line"]),
        ("OOM: memory full while failing", [200, 400, 800, 1600], [100] * 4,
         {"gpu_mem_peak_pct": [50, 60, 80, 99.5], "ok": [1000] * 3 + [999],
          "errors": [0, 0, 0, 1]}, {}, ["comfortable", "comfortable", "comfortable", "red_line"]),
        ("OOM: process vanished", [200, 400, 800, 0], [100, 100, 100, NAN],
         {"gpu_mem_peak_pct": [50, 70, 90, 0], "ok": [1000] * 3 + [0],
          "errors": [0, 0, 0, 1]}, {"red_line_error_pct": 100},
         ["comfortable", "comfortable", "critical", "red_line"]),
    ],
)  # fmt: skip
def test_each_rule(name, tok_s, p95, extra, params, expected):
    summary = sweep(LEVELS, tok_s, p95, baseline_tok_s=100.0, baseline_p95_ms=100.0, **extra)
    result = _knee(summary, **params)
    assert _verdicts(result) == expected, (name, [v.reasons for v in result.stages])


def test_no_knee_in_range_says_so():
    summary = _scaling()
    result = _knee(summary)
    assert result.knee_stage is None and result.red_line_stage is None
    assert result.max_concurrency == 16 and result.base_capacity == 16


def test_knee_before_red_line_and_max_concurrency_before_red_line_without_knee():
    summary = _scaling(ok=[1000, 1000, 500, 500], errors=[0, 0, 500, 500])
    result = _knee(summary)
    assert result.knee_users is None and result.red_line_users == 8
    assert result.max_concurrency == 4 and result.base_capacity == 4


def test_kv_cache_wins_over_flat_preallocated_gpu_memory():
    kv = {"gpu_mem_peak_pct": [90.0] * 4, "kv_cache_peak_pct": [10, 20, 40, 80]}
    summary = _scaling(**kv)
    assert _verdicts(_knee(summary)) == ["comfortable"] * 4  # NVML 90 % is pre-allocation
    assert _verdicts(_knee(summary, memory_source="gpu")) == ["critical"] * 4
    moving = {"gpu_mem_peak_pct": [50, 60, 70, 88], "kv_cache_peak_pct": [10, 20, 40, 60]}
    summary = _scaling(**moving)
    assert _verdicts(_knee(summary))[-1] == "critical"  # dynamic GPU memory counts


def test_client_bound_stage_is_untrusted_and_not_the_knee():
    summary = sweep(
        LEVELS,
        [200, 400, 800, 820],
        [100, 100, 110, 250],
        baseline_tok_s=100.0,
        baseline_p95_ms=100.0,
        client_cpu_peak_pct=[20, 30, 50, 97],
    )
    result = _knee(summary)
    last = result.stages[-1]
    assert not last.trusted and last.verdict == "critical"
    client = _signal(last, "client_bound")
    assert client.fired and client.fact.cpu_peak_pct == 97 and client.fact.threshold_pct == 90
    assert result.knee_stage is None and [v.trusted for v in result.stages] == [True] * 3 + [False]


def test_first_stage_stands_in_for_missing_baseline():
    summary = frame(
        [
            stage(4, output_tok_s=400.0, e2e_p95_ms=100.0),
            stage(8, output_tok_s=420.0, e2e_p95_ms=250.0),
        ]
    )
    baseline = compute_baseline(None, summary)
    assert baseline.source == "first_stage" and baseline.output_tok_s == 100.0
    result = find_knee(summary, baseline)
    assert _verdicts(result) == ["comfortable", "knee"]


def test_params_cli_round_trip_and_recorded_in_result():
    parser = argparse.ArgumentParser()
    KneeParams.add_cli_args(parser)
    ns = parser.parse_args(["--knee-tail", "p99", "--sla-ms", "2500", "--red-line-error-pct", "0"])
    params = KneeParams.from_cli_args(ns)
    assert params == KneeParams(tail_percentile="p99", sla_ms=2500.0, red_line_error_pct=0.0)
    assert KneeParams.from_cli_args(parser.parse_args([])) == KneeParams()
    result = _knee(seed_002_summary(), tail_percentile="p99")
    assert json.loads(json.dumps(result.params))["tail_percentile"] == "p99"


def test_find_knee_does_not_mutate_its_input():
    summary = seed_002_summary()
    before = summary.copy()
    _knee(summary)
    assert summary.equals(before)


def test_tail_on_seconds_per_1k_tokens_ignores_longer_outputs():
    # latency doubles at 16 users only because answers got twice as long (log replay): per 1k
    # tokens nothing departed, so the e2e tail calls a knee where seconds per 1k tokens do not
    summary = sweep(LEVELS, [200, 400, 800, 820], [100, 100, 110, 250], baseline_tok_s=100.0,
                    baseline_p95_ms=100.0, s_per_1k_total_p95=[1.0, 1.0, 1.1, 1.2])  # fmt: skip
    summary.loc[0, "s_per_1k_total_p95"] = 1.0
    assert _verdicts(_knee(summary))[-1] == "knee"
    per_1k = _knee(summary, tail_metric="s_per_1k")
    assert _verdicts(per_1k)[-1] == "critical"
    tail = _signal(per_1k.stages[-1], "tail_departure")
    assert not tail.fired and tail.value == pytest.approx(1.2)
    assert (tail.fact.metric, tail.fact.percentile, tail.fact.tail) == ("s_per_1k", "p95", 1.2)


@pytest.mark.parametrize(
    ("given", "source", "slowdown", "expected"),
    [
        ("auto", {"kind": "log_replay"}, 1.02, "slowdown"),  # replayed lengths vary
        ("auto", {"kind": "log"}, 1.02, "slowdown"),
        # a log whose single-user requests were all one length: no slowdown, the e2e tail
        ("auto", {"kind": "log_replay"}, None, "e2e"),
        ("auto", {"kind": "fixed"}, None, "e2e"),
        ("auto", {"kind": "fixed"}, 1.02, "e2e"),
        ("auto", None, None, "e2e"),
        ("e2e", {"kind": "log_replay"}, 1.02, "e2e"),  # an explicit choice stands
        ("s_per_1k", {"kind": "fixed"}, None, "s_per_1k"),
        ("slowdown", {"kind": "fixed"}, 1.02, "slowdown"),
        ("slowdown", {"kind": "fixed"}, None, "e2e"),  # none to read
    ],
)
def test_tail_metric_auto_follows_the_prompt_source(given, source, slowdown, expected):
    from analysis.knee.find import KneeParams, resolve_tail_metric

    info = {} if source is None else {"prompt_source": source}
    baseline = replace(compute_baseline(None, seed_002_summary()), slowdown_p95=slowdown)
    got = resolve_tail_metric(KneeParams(tail_metric=given), info, baseline)
    assert got.tail_metric == expected


@pytest.mark.parametrize(
    ("tok_s", "expected_knee", "expected_verdicts"),
    [
        # llama-server on busy cores: flat 2 → 4, then 65 % more at 8, flat again at 16
        ([125, 144, 237, 218, 195], 16, ["critical", "critical", "critical", "knee", "knee"]),
        # a later stage only 10 % better: still the knee (below the 15 % that counts)
        ([125, 144, 150, 158, 150], 4, ["critical", "knee", "knee", "knee", "knee"]),
    ],
)
def test_a_flat_stage_that_later_stages_out_serve_is_a_dip_not_the_knee(
    tok_s, expected_knee, expected_verdicts
):
    levels = [2, 4, 8, 16, 32]
    summary = sweep(
        levels, tok_s, [1100, 2200, 2300, 5300, 10600],
        baseline_tok_s=97.0, baseline_p95_ms=690.0,
    )  # fmt: skip
    result = _knee(summary)
    assert result.knee_users == expected_knee, [v.reasons for v in result.stages]
    assert _verdicts(result) == expected_verdicts
    dip = next((v for v in result.stages if v.target_users == 4), None)
    if expected_knee != 4:
        assert dip is not None
        resumed = _signal(dip, "throughput_resumed")
        assert resumed.fired and dip.reasons[0] == resumed
        assert (resumed.fact.later_users, resumed.fact.later_rate) == (8, 237)
        assert (resumed.fact.rate, resumed.fact.threshold_pct) == (144, 15.0)


def test_the_dip_threshold_is_a_parameter():
    summary = sweep(
        [2, 4, 8], [125, 144, 237], [1100, 2200, 2300], baseline_tok_s=97.0, baseline_p95_ms=690.0
    )
    assert _knee(summary).knee_users is None  # 4 was a dip; 8 still grows
    assert _knee(summary, resume_gain_pct=100.0).knee_users == 4  # 65 % no longer counts


def _noisy_baseline_sweep(level_ok: int, level_p95_ms: float) -> object:
    """A busy machine's numbers: a 10-request baseline one slow request pushed to P95 9.9 s (median
    2.75 s), a 1-user level, then an 8-slot server at 8 and 16 users (half of 16 queued)."""
    return frame(
        [
            stage(1, kind="baseline", output_tok_s=15.5, e2e_p50_ms=2750.0,
                  e2e_p95_ms=9890.0, e2e_p99_ms=12000.0, ok=10, requests=10),
            stage(1, output_tok_s=22.4, e2e_p95_ms=level_p95_ms, ok=level_ok),
            stage(8, output_tok_s=51.2, e2e_p95_ms=11200.0, ok=41),
            stage(16, output_tok_s=55.1, e2e_p95_ms=21600.0, ok=92),
        ]
    )  # fmt: skip


@pytest.mark.parametrize(
    ("level_ok", "level_p95_ms", "yardstick", "source"),
    [
        (32, 4420.0, 4420.0, "one_user_level"),  # longer and lower: the level's tail
        (32, 10500.0, 9890.0, "baseline"),  # the baseline is the lower: it stays
        (8, 4420.0, 9890.0, "baseline"),  # fewer requests than the baseline: not surer
    ],
)
def test_the_tail_yardstick_is_the_lower_single_user_tail(
    level_ok: int, level_p95_ms: float, yardstick: float, source: str
) -> None:
    result = _knee(_noisy_baseline_sweep(level_ok, level_p95_ms))
    at_16 = next(v for v in result.stages if v.target_users == 16)
    tail = next(s for s in at_16.signals if s.name == "tail_departure")
    assert tail.value == pytest.approx(21600.0 / yardstick)
    assert (tail.fact.source, tail.fact.base_tail) == (source, yardstick)
    assert tail.fired == (21600.0 / yardstick >= 2.0)
    # every stage is held against the same yardstick (the summary names it when not the baseline)
    assert {_signal(v, "tail_departure").fact.source for v in result.stages} == {source}


def test_the_tail_yardstick_follows_the_tail_metric() -> None:
    """With seconds per 1k tokens (a replayed log) the 1-user level's figure is that metric's."""
    summary = _noisy_baseline_sweep(32, 4420.0)
    summary["s_per_1k_total_p95"] = [400.0, 150.0, 380.0, 700.0]
    result = _knee(summary, tail_metric="s_per_1k")
    tail = _signal(result.stages[-1], "tail_departure")
    assert tail.value == pytest.approx(700.0 / 150.0) and tail.fact.source == "one_user_level"
    assert (tail.fact.metric, tail.fact.base_tail) == ("s_per_1k", 150.0)
