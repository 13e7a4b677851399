"""The bottleneck rule table: every rule fires, the first match wins, and order decides overlaps.

Each case is one stage built by hand (a summary row, the signals that fired, the baseline) for
which ``expected`` is the first rule to match; ``also`` lists later rules that match the same
stage, so the case shows the table's order, not the rule alone, decides the bottleneck.
"""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest

import analysis.diagnosis.bottleneck as diagnosis
from analysis.diagnosis.bottleneck import (
    RULES,
    DiagnosisParams,
    diagnose_stage,
    first_match,
    stage_facts,
)
from analysis.diagnosis.facts import FailureKind, FailureMix, NoRuleFact
from analysis.model import Baseline, Signal, StageVerdict

SIGNALS = ("throughput_flattening", "gain_narrowing", "tail_departure", "sla", "oom",
           "memory_pressure", "errors", "error_rate", "server_saturated")  # fmt: skip
#: a stage where a fifth of the requests were turned away (the ``failing`` rule's case)
REJECTED = FailureMix(requests=100, kinds=((FailureKind("http_error", 503), 20),),
                      messages=(("queue full", 20),),
                      overload=20, stalls=0, server_errors=0)  # fmt: skip


def _baseline(*, interference: bool = False, warnings: tuple[str, ...] = ()) -> Baseline:
    return Baseline(
        source="baseline", requests=20, e2e_p50_ms=100.0, e2e_p95_ms=120.0, ttft_p50_ms=20.0,
        ttft_p95_ms=20.0, s_per_1k_total_p50=None, s_per_1k_total_p95=None,
        s_per_1k_completion_p50=None, s_per_1k_completion_p95=None, output_tok_s=100.0,
        warnings=warnings, stage=0, target_users=1, interference_suspected=interference,
    )  # fmt: skip


def _verdict(
    fired: tuple[str, ...],
    *,
    trusted: bool = True,
    verdict: str = "knee",
    memory: float | None = None,
):
    """``memory``: the memory % the knee judged (its memory-pressure signal's value)."""
    signals = tuple(
        Signal(name, name in fired, memory if name == "memory_pressure" else None, None, name)
        for name in SIGNALS
    )
    return StageVerdict(stage=3, target_users=16, verdict=verdict, reasons=(),  # type: ignore[arg-type]
                        signals=signals, trusted=trusted)  # fmt: skip


def _row(**values: float) -> pd.Series:
    return pd.Series({"stage": 3, "target_users": 16, "ok": 100, **values}, dtype=float)


def _facts(case: dict):
    row = case.get("row", {})
    # the knee's "auto" memory source on a stage with one gauge or both: the higher one
    gauges = [row[k] for k in ("kv_cache_peak_pct", "gpu_mem_peak_pct") if k in row]
    return stage_facts(
        _row(**row),
        _verdict(
            case.get("fired", ()),
            trusted=case.get("trusted", True),
            verdict=case.get("verdict", "knee"),
            memory=max(gauges) if gauges else None,
        ),
        prev=_row(**case["prev"]) if "prev" in case else None,
        base_row=_row(**case["base"]) if "base" in case else None,
        baseline=_baseline(
            interference=case.get("interference", False), warnings=case.get("warnings", ())
        ),
        params=DiagnosisParams(),
        failures=case.get("failures"),
    )


# expected rule, later rules that match too, what it saw (figures of its fact), the stage
CASES = [
    ("client_bound", ("memory_full", "closed_loop_wait"), {"client_cpu_peak_pct": 95},
     {"trusted": False, "row": {"client_cpu_peak_pct": 95, "kv_cache_peak_pct": 97},
      "fired": ("throughput_flattening",)}),
    ("memory_full", ("gpu_idle", "closed_loop_wait"), {"memory": "kv_cache", "memory_pct": 97},
     {"row": {"kv_cache_peak_pct": 97, "gpu_idle_pct": 40}, "fired": ("tail_departure",)}),
    ("memory_full", (), {"preemptions": 3}, {"row": {"preemptions": 3}, "fired": ()}),
    ("memory_full", ("memory_leading",), {"memory": "gpu", "memory_pct": 90},
     {"row": {"gpu_mem_peak_pct": 90}, "fired": ("oom", "memory_pressure")}),
    ("failing", ("gpu_idle",), {"family": "overload", "share_pct": 20},
     {"row": {"gpu_idle_pct": 40}, "fired": ("errors", "error_rate"), "verdict": "red_line",
      "failures": REJECTED}),
    ("gpu_idle", ("server_queue", "closed_loop_wait"), {"gpu_idle_pct": 40},
     {"row": {"gpu_idle_pct": 40, "waiting_mean": 2}, "fired": ("tail_departure",)}),
    ("server_queue", ("prefill", "kv_contention"), {"waiting_mean": 8, "waiting_max": 9},
     {"row": {"waiting_mean": 8, "waiting_max": 9, "ttft_p95_ms": 200, "itl_p50_ms": 10},
      "base": {"itl_p50_ms": 10}, "fired": ("tail_departure",)}),
    # the server's counters say its slots are full and 1.6 wait, while the client-side tail and
    # throughput stayed inside a noisy run's bands: queueing, not the baseline's interference
    # (a llama-server slot knee beside a CPU hog must not read as "interference")
    ("server_queue", ("interference",), {"waiting_mean": 1.6},
     {"row": {"waiting_mean": 1.6, "waiting_max": 2}, "fired": ("server_saturated",),
      "interference": True}),
    ("prefill", ("kv_contention", "closed_loop_wait"), {"ttft_ratio": 10, "decode": "itl"},
     {"row": {"ttft_p95_ms": 200, "itl_p50_ms": 10, "sm_util_mean_pct": 20, "waiting_mean": 0},
      "base": {"itl_p50_ms": 10}, "fired": ("tail_departure",)}),
    ("kv_contention", ("compute_saturated", "empty_queue"),
     {"waiting_grew": True, "prev_waiting": 0.1, "waiting": 0.3},
     {"row": {"waiting_mean": 0.3, "gpu_util_mean_pct": 95}, "prev": {"waiting_mean": 0.1},
      "fired": ("tail_departure", "throughput_flattening")}),
    ("compute_saturated", ("empty_queue", "closed_loop_wait"), {"gpu_util_pct": 95},
     {"row": {"gpu_util_mean_pct": 95, "waiting_mean": 0}, "fired": ("gain_narrowing",)}),
    ("throughput_stuck", ("closed_loop_wait",), {"gpu_util_pct": 30},
     {"row": {"gpu_util_mean_pct": 30}, "fired": ("throughput_flattening",)}),
    ("empty_queue", ("closed_loop_wait",), {"waiting_mean": 0.2},
     {"row": {"waiting_mean": 0.2, "gpu_util_mean_pct": 70}, "prev": {"waiting_mean": 0.5},
      "fired": ("tail_departure",)}),
    ("closed_loop_wait", ("memory_leading", "interference"),
     {"missing": ("gpu_util", "server_queue")},
     {"row": {}, "fired": ("gain_narrowing", "memory_pressure"), "interference": True}),
    ("memory_leading", ("interference",), {"memory": "gpu", "memory_pct": 88},
     {"row": {"gpu_mem_peak_pct": 88}, "fired": ("memory_pressure",), "interference": True}),
    ("interference", (), {}, {"row": {}, "fired": ("errors",),
                                                   "interference": True}),
]  # fmt: skip
BY_NAME = {rule.name: rule for rule in RULES}


@pytest.mark.parametrize(("expected", "also", "saw", "case"), CASES)
def test_first_match_wins_and_later_rules_also_match(expected, also, saw, case):
    facts = _facts(case)
    rule, reason = first_match(facts)
    assert rule.name == expected == reason.kind, reason
    for name, value in saw.items():
        assert getattr(reason, name) == pytest.approx(value), name
    for name in also:  # the overlap is real: each later rule matches this stage on its own
        assert BY_NAME[name].check(facts) is not None, name
        assert [r.name for r in RULES].index(name) > [r.name for r in RULES].index(expected)
    for earlier in RULES[: RULES.index(rule)]:
        assert earlier.check(facts) is None, earlier.name
    assert diagnose_stage(facts) == (rule.bottleneck, reason)


@pytest.mark.parametrize(("expected", "also", "saw", "case"), [c for c in CASES if c[1]])
def test_order_decides_the_overlap(expected, also, saw, case):
    """Swap the winner with the next rule that also matches: that rule wins instead."""
    rules = list(RULES)
    i, j = rules.index(BY_NAME[expected]), rules.index(BY_NAME[also[0]])
    rules[i], rules[j] = rules[j], rules[i]
    match = first_match(_facts(case), tuple(rules))
    assert match is not None and match[0].name == also[0]


def test_every_rule_fires_in_some_case():
    assert {case[0] for case in CASES} == set(BY_NAME)
    assert len(BY_NAME) == len(RULES)  # names are unique


def test_no_rule_matches_a_stage_with_only_an_early_error():
    case = {"row": {}, "fired": ("errors",)}
    facts = _facts(case)
    assert first_match(facts) is None
    assert diagnose_stage(facts) == ("none", NoRuleFact())


@pytest.mark.parametrize(("trusted", "expected"), [(True, "none"), (False, "client")])
def test_a_comfortable_stage_is_only_checked_for_the_client(trusted, expected):
    row = {"kv_cache_peak_pct": 99, "client_cpu_peak_pct": 97}  # memory full would match
    facts = _facts({"row": row, "trusted": trusted, "verdict": "comfortable"})
    assert diagnose_stage(facts)[0] == expected


def test_interference_reads_the_baseline_flag_not_its_warning_text():
    words = (
        "baseline e2e latency (ms) P95 300 is 3.00× its median 100 (limit 1.5×): external "
        "interference (another process on the GPU, network jitter, log flushing)",
    )
    for flag, warnings, expected in ((False, words, "none"), (True, (), "interference")):
        case = {"fired": ("errors",), "interference": flag, "warnings": warnings}
        assert diagnose_stage(_facts(case))[0] == expected


def test_the_module_docstring_lists_the_table_in_order():
    doc = diagnosis.__doc__ or ""
    listed = re.findall(r"^\s*(\d+)\. ``(\w+)`` → \*\*(\w+)\*\*", doc, flags=re.MULTILINE)
    assert [int(n) for n, _, _ in listed] == list(range(1, len(RULES) + 1))
    assert [(name, kind) for _, name, kind in listed] == [(r.name, r.bottleneck) for r in RULES]


def test_missing_numbers_read_as_none_not_zero():
    facts = _facts({"row": {"gpu_util_mean_pct": math.nan, "waiting_mean": math.nan}})
    assert facts.util is None and facts.waiting is None and facts.mem is None


@pytest.mark.parametrize(
    ("waiting", "empty"), [(0.0, True), (0.49, True), (0.5, False), (3, False)]
)
def test_empty_queue_alone_calls_a_queue_empty_only_under_the_minimum(waiting, empty):
    """In the table server_queue catches a real queue first; alone, the rule still says no."""
    facts = _facts({"row": {"waiting_mean": waiting}, "fired": ("tail_departure",)})
    assert (BY_NAME["empty_queue"].check(facts) is not None) is empty
