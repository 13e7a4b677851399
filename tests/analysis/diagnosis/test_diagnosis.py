"""diagnose: one synthetic stage per bottleneck rule of the seeds, judged by what its rule saw
(:mod:`analysis.diagnosis.facts`), not by its words."""

from __future__ import annotations

import pytest

from analysis.diagnosis.bottleneck import DiagnosisParams, diagnose
from analysis.knee.find import find_knee
from analysis.stages.baseline import compute_baseline
from tests.support.knee_frames import sweep

LEVELS = [2, 4, 8, 16]
SCALING = [200, 400, 800, 1600]
FLAT = [200, 400, 800, 820]


def _saw(reason, kind: str, **values) -> bool:
    """Whether the rule behind a bottleneck is ``kind`` and saw ``values``."""
    return getattr(reason, "kind", None) == kind and all(
        getattr(reason, name) == pytest.approx(value) for name, value in values.items()
    )


def _sweep(tok_s, p95, **columns):
    """A sweep over ``LEVELS`` after a baseline of 100 tok/s at P95 100 ms."""
    return sweep(LEVELS, tok_s, p95, baseline_tok_s=100.0, baseline_p95_ms=100.0, **columns)


def _last_of(summary):
    """The diagnosis of the last stage of ``summary``, its baseline and knee found afresh."""
    baseline = compute_baseline(None, summary)
    return diagnose(summary, find_knee(summary, baseline), baseline).stages[-1]


def _last(tok_s, p95, **columns):
    return _last_of(_sweep(tok_s, p95, **columns))


@pytest.mark.parametrize(
    ("name", "tok_s", "p95", "columns", "expected", "saw"),
    [
        ("client-bound", SCALING, [100] * 4, {"client_cpu_peak_pct": [10, 10, 10, 95]},
         "client", ("client_bound", {"client_cpu_peak_pct": 95})),
        ("memory full", FLAT, [100, 100, 110, 300], {"kv_cache_peak_pct": [10, 20, 40, 97]},
         "memory", ("memory_full", {"memory": "kv_cache", "memory_pct": 97, "full_pct": 95})),
        ("preemptions", FLAT, [100, 100, 110, 300], {"preemptions": [0, 0, 0, 12]},
         "memory", ("memory_full", {"preemptions": 12})),
        ("host-side stalls", FLAT, [100, 100, 110, 300],
         {"gpu_idle_pct": [0, 0, 5, 40], "gpu_util_mean_pct": [50, 60, 60, 50]},
         "host_side", ("gpu_idle", {"gpu_idle_pct": 40, "threshold_pct": 20})),
        ("queueing / KV contention", FLAT, [100, 100, 110, 300],
         {"waiting_mean": [0, 0, 1, 9], "sm_util_mean_pct": [20, 25, 30, 35],
          "kv_cache_peak_pct": [10, 20, 40, 60]}, "queueing",
         ("server_queue", {"waiting_mean": 9, "memory": "kv_cache", "memory_pct": 60})),
        ("compute-bound", FLAT, [100, 100, 110, 300], {"gpu_util_mean_pct": [60, 80, 95, 99]},
         "compute", ("compute_saturated", {"gpu_util_pct": 99, "threshold_pct": 90})),
        ("throughput stuck, GPU mostly idle", FLAT, [100, 100, 110, 150],
         {"gpu_util_mean_pct": [20, 25, 30, 30]}, "host_side",
         ("throughput_stuck", {"gpu_util_pct": 30, "threshold_pct": 50})),
        ("no telemetry: queueing inferred", FLAT, [100, 100, 110, 300], {}, "queueing",
         ("closed_loop_wait", {"missing": ("gpu_util", "server_queue")})),
        ("memory as the leading indicator", SCALING, [100] * 4,
         {"gpu_mem_peak_pct": [50, 60, 70, 88]}, "memory",
         ("memory_leading", {"memory": "gpu", "memory_pct": 88})),
        ("comfortable: nothing to diagnose", SCALING, [100] * 4, {}, "none", None),
    ],
)  # fmt: skip
def test_each_rule(name, tok_s, p95, columns, expected, saw):
    last = _last(tok_s, p95, **columns)
    assert last.bottleneck == expected, (name, last.verdict, last.bottleneck_reason)
    if saw is None:
        assert last.bottleneck_reason == ""
    else:
        assert _saw(last.bottleneck_reason, saw[0], **saw[1]), last.bottleneck_reason


def test_prefill_bound_when_ttft_high_and_itl_normal():
    columns = {"ttft_p95_ms": [20, 20, 30, 200], "itl_p50_ms": [10, 10, 11, 12],
               "waiting_mean": [0, 0, 0, 0]}  # fmt: skip
    summary = _sweep(SCALING, [100, 100, 110, 300], **columns)
    summary.loc[0, ["ttft_p95_ms", "itl_p50_ms"]] = [20.0, 10.0]  # the baseline stage
    last = _last_of(summary)
    assert last.bottleneck == "prefill", last.bottleneck_reason
    assert _saw(last.bottleneck_reason, "prefill", ttft_p95_ms=200, ttft_ratio=10,
                decode="itl", decode_p50_ms=12, decode_ratio=1.2)  # fmt: skip
    summary.loc[4, "itl_p50_ms"] = 40.0  # ITL rose too: not prefill alone
    last = _last_of(summary)
    assert last.bottleneck != "prefill"


def test_a_server_queue_is_queueing_not_prefill():
    """TTFT high with ITL normal looks like prefill, but a waiting queue means slot queueing."""
    columns = {
        "ttft_p95_ms": [20, 20, 30, 900],
        "itl_p50_ms": [10, 10, 11, 12],
        "waiting_mean": [0, 0, 0, 8],
        "waiting_max": [0, 0, 0, 8],
    }
    summary = _sweep(FLAT, [100, 100, 110, 300], **columns)
    summary.loc[0, ["ttft_p95_ms", "itl_p50_ms", "waiting_mean"]] = [20.0, 10.0, 0.0]
    last = _last_of(summary)
    assert last.bottleneck == "queueing", last.bottleneck_reason
    assert _saw(last.bottleneck_reason, "server_queue", waiting_mean=8, waiting_max=8)
    summary.loc[4, ["waiting_mean", "waiting_max"]] = [0.0, 0.0]  # no queue: prefill again
    last = _last_of(summary)
    assert last.bottleneck == "prefill", last.bottleneck_reason


def test_without_a_queue_gauge_a_ttft_rise_is_the_closed_loops_queueing_not_prefill():
    """TTFT 10× the baseline's with decode as fast as alone, from a server that exports no queue
    gauge: a wait for a slot looks the same as slow prefill and is the common cause (a slot-bound
    simulator without /metrics read "prefill" on fixed-length prompts), so not prefill."""
    columns = {"ttft_p95_ms": [20, 20, 30, 200], "itl_p50_ms": [10, 10, 11, 12]}
    summary = _sweep(FLAT, [100, 100, 110, 300], **columns)
    summary.loc[0, ["ttft_p95_ms", "itl_p50_ms"]] = [20.0, 10.0]  # the baseline stage
    summary["waiting_mean"] = float("nan")  # no gauge
    last = _last_of(summary)
    assert last.bottleneck == "queueing", last.bottleneck_reason
    assert _saw(last.bottleneck_reason, "closed_loop_wait")
    summary["waiting_mean"] = 0.0  # the gauge says nothing waited: the TTFT rise is prefill
    assert _last_of(summary).bottleneck == "prefill"


def test_bursty_chunks_judge_decode_speed_by_tpot_not_itl():
    """vLLM on CPU flushes chunks in bursts (ITL median ~0): TPOT says decode slowed too."""
    columns = {
        "ttft_p95_ms": [20, 20, 30, 200],
        "itl_p50_ms": [0.01] * 4,
        "tpot_p50_ms": [10, 10, 20, 40],
        "waiting_mean": [0, 0, 0, 0],
    }
    summary = _sweep(SCALING, [100, 100, 110, 300], **columns)
    summary.loc[0, ["ttft_p95_ms", "itl_p50_ms", "tpot_p50_ms"]] = [20.0, 0.01, 10.0]
    last = _last_of(summary)
    assert last.bottleneck != "prefill", last.bottleneck_reason
    summary.loc[4, "tpot_p50_ms"] = 11.0  # decode as fast as alone: the TTFT rise is prefill
    last = _last_of(summary)
    assert last.bottleneck == "prefill"
    assert _saw(last.bottleneck_reason, "prefill", decode="tpot", decode_ratio=1.1)


def test_an_empty_server_queue_with_a_rising_tail_is_compute_not_queueing():
    summary = _sweep(FLAT, [100, 100, 110, 300], waiting_mean=[0.0] * 4)
    last = _last_of(summary)
    assert last.bottleneck == "compute", last.bottleneck_reason
    assert _saw(last.bottleneck_reason, "empty_queue", waiting_mean=0, threshold_waiting=0.5)


def test_interference_from_the_baseline_warning():
    summary = _sweep(SCALING, [100, 100, 110, 160], gpu_util_mean_pct=[50] * 4)
    summary.loc[0, "e2e_p50_ms"] = 40.0  # baseline P95 2.5× its median
    summary.loc[4, "success_pct"], summary.loc[4, "errors"] = 99.9, 1  # an early sign only
    last = _last_of(summary)
    assert last.verdict == "critical"
    assert last.bottleneck == "interference", last.bottleneck_reason


def test_thresholds_are_parameters():
    columns = {"gpu_util_mean_pct": [60, 80, 85, 85]}
    summary = _sweep(FLAT, [100, 100, 110, 300], **columns)
    baseline = compute_baseline(None, summary)
    knee = find_knee(summary, baseline)
    assert diagnose(summary, knee, baseline).stages[-1].bottleneck == "queueing"
    lower = DiagnosisParams(compute_util_pct=80.0)
    assert diagnose(summary, knee, baseline, params=lower).stages[-1].bottleneck == "compute"
