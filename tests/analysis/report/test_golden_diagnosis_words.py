"""Golden output: the words of every bottleneck rule and of a stage's failures
(:mod:`analysis.report.diagnosis_words`).

The diagnosis's tests assert on its facts (:mod:`analysis.diagnosis.facts`); this file pins what
each says, rule by rule and branch by branch, in ``tests/support/data/golden/diagnosis_words.txt``
(one ``case: words`` line each). When a rewording is intended, regenerate it with the other golden
files and review the diff:

    LOADKNEE_UPDATE_GOLDEN=1 python -m pytest -n 0 \
        tests/analysis/report/test_golden_diagnosis_words.py
"""

from __future__ import annotations

import pandas as pd

from analysis.diagnosis.bottleneck import diagnose_stage, first_match
from analysis.diagnosis.facts import FailureKind, FailureMix
from analysis.diagnosis.failures import (
    all_failed_warnings,
    late_client_warnings,
    shared_host_warning,
    small_stage_warnings,
)
from analysis.report.diagnosis_words import (
    all_failed_text,
    diagnosis_words,
    late_client_text,
    mix_text,
    shared_host_text,
    small_stage_text,
)
from tests.analysis.diagnosis.test_diagnosis_rules import BY_NAME, CASES, REJECTED, _facts
from tests.support.golden import check_golden
from tests.support.knee_frames import sweep

_STALLED = FailureMix(requests=200,
                      kinds=((FailureKind("timeout"), 30), (FailureKind("http_error", 500), 1)),
                      messages=(("read timed out", 30), ("boom", 1)), overload=0, stalls=30,
                      server_errors=1)  # fmt: skip
_BROKEN = FailureMix(requests=2000, kinds=((FailureKind("incomplete"), 5),
                                           (FailureKind("http_error"), 3)), messages=(),
                     overload=0, stalls=0, server_errors=8)  # fmt: skip
#: case → a stage the table's rules read, beyond the rule table's own cases
MORE = {
    "failing, stalls": {"row": {"e2e_p95_ms": 850.0}, "fired": ("error_rate",),
                        "verdict": "red_line", "failures": _STALLED},
    "failing, server errors": {"row": {}, "fired": ("errors",), "failures": _BROKEN},
    "server queue, one request": {"row": {"waiting_mean": 1, "waiting_max": 1,
                                          "kv_cache_peak_pct": 60}, "fired": ("tail_departure",)},
    "kv contention, SM low": {"row": {"sm_util_mean_pct": 20, "kv_cache_peak_pct": 50},
                              "fired": ("tail_departure",)},
    "kv contention, both": {"row": {"waiting_mean": 0.4, "sm_util_mean_pct": 20},
                            "fired": ("tail_departure",)},
    "prefill, TPOT, queue known": {"row": {"ttft_p95_ms": 200, "tpot_p50_ms": 12,
                                           "waiting_mean": 0},
                                   "base": {"tpot_p50_ms": 10}, "fired": ("tail_departure",)},
    "closed loop, no server queue": {"row": {"gpu_util_mean_pct": 70},
                                     "fired": ("gain_narrowing",)},
    "no rule": {"row": {}, "fired": ("errors",)},
}  # fmt: skip


def _reason(case: dict) -> str:
    reason = diagnose_stage(_facts(case))[1]
    return "" if reason is None else diagnosis_words(reason)


def _rule_words(name: str, case: dict) -> str:
    """What one rule says of a stage on its own (a branch the table's order never reaches)."""
    fact = BY_NAME[name].check(_facts(case))
    assert fact is not None, name
    return diagnosis_words(fact)


def _text() -> str:
    lines = []
    for expected, _, _, case in CASES:
        rule = first_match(_facts(case))
        lines.append(f"{expected}: {_reason(case)}" if rule else f"{expected}: -")
    lines += [f"{name}: {_reason(case)}" for name, case in MORE.items()]
    known = {"row": {"waiting_mean": 0.2, "gpu_util_mean_pct": 70}, "fired": ("gain_narrowing",)}
    lines.append(f"closed loop alone, all known: {_rule_words('closed_loop_wait', known)}")
    for name, mix in (("rejected", REJECTED), ("stalled", _STALLED), ("broken", _BROKEN)):
        lines.append(f"failures, {name}: {mix_text(mix)}")
    summary = sweep([1, 2, 4], [100, 200, 400], [100] * 3, requests=[12, 40, 1],
                    window_s=[30.0, 30.0, 3.0])  # fmt: skip
    lines += [f"small stage: {small_stage_text(f)}" for f in small_stage_warnings(summary)]
    requests = pd.DataFrame({
        "outcome": ["http_error"] * 5 + ["timeout"] * 2 + ["incomplete", "cancelled"],
        "http_status": [503.0] * 5 + [float("nan")] * 4,
        "error": [""] * 5 + ["read timed out"] * 2 + ["", "user stopped before the response"],
    })  # fmt: skip
    lines += [f"all failed: {all_failed_text(f)}" for f in all_failed_warnings(requests)]
    lagged = sweep([1, 8], [100, 800], [100] * 2, e2e_p50_ms=[80.0, 400.0],
                   client_lag_mean_ms=[60.0, 90.0], client_lag_p95_ms=[60.0, 150.0],
                   client_lag_max_ms=[60.0, 212.5],
                   host_load_1m=[float("nan"), 7.94], host_cpus=[float("nan"), 2])  # fmt: skip
    lines += [f"late client: {late_client_text(f)}" for f in late_client_warnings(lagged)]
    shared = shared_host_warning(lagged, {"target_url": "http://127.0.0.1:8000"})
    assert shared is not None
    lines.append(f"shared host: {shared_host_text(shared)}")
    return "\n".join(lines) + "\n"


def test_every_diagnosis_fact_kind_has_its_golden_words() -> None:
    text = _text()
    check_golden("diagnosis_words.txt", text)
