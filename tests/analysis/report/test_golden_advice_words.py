"""Golden output: the words of every kind of advice fact (:mod:`analysis.report.advice_words`).

The advice's tests assert on the facts (:mod:`analysis.advice.facts`); this file pins what each
fact says, branch by branch, in ``tests/support/data/golden/advice_words.txt`` (one
``case: words`` line each). When a rewording is intended, regenerate it with the other golden
files and review the diff:

    LOADKNEE_UPDATE_GOLDEN=1 python -m pytest -n 0 tests/analysis/report/test_golden_advice_words.py
"""

from __future__ import annotations

from typing import Any

from analysis.advice.facts import (
    BaseCapacityFact,
    CapFact,
    DeployAnswer,
    DeployFact,
    GpuMemoryFact,
    KneeWhyFact,
    MaxConcurrencyFact,
    ModelLenFact,
    OfflineFact,
    OwnLimitFact,
    QueueTimeoutFact,
    Recommendation,
    ReplicasFact,
    RequestTimeoutFact,
    SloAdviceFact,
    WatermarkFact,
    WithheldFact,
)
from analysis.knee.facts import ErrorsFact, NoSignalFact, RefusalsFact, SlaFact, TailFact
from analysis.model import KneeResult, Signal
from analysis.report.advice_words import (
    context_lines,
    deploy_bound_text,
    deploy_text,
    flag_words,
    reason_words,
    sweep_command,
    withheld_text,
)
from analysis.slo.facts import CapacityDoubt
from loadknee_core.slo_targets import Slo, SloParams
from tests.support.golden import check_golden

_TAIL = Signal(
    "tail_departure",
    True,
    9.0,
    2.0,
    fact=TailFact("tail", "p95", "e2e", 1800.0, 200.0, "baseline", 9.0, None, 2.0, "departed"),
)
_SLA = Signal("sla", True, 2612.0, 2500.0, fact=SlaFact("sla", "p99", 2612.0, 2500.0))
_ERRORS = Signal("errors", True, 97.5, 100.0, fact=ErrorsFact("errors", 97.5, 5, 200, 0.0))
_REFUSALS = Signal("refusals", True, 3.2, 0.0, fact=RefusalsFact("refusals", 2, 62, 3.2258))
_TTFT_500 = SloParams(slos=(Slo("ttft", 95.0, 500.0),))
_E2E_300 = SloParams(slos=(Slo("e2e", 95.0, 300.0),))
_BOTH = SloParams(slos=(Slo("e2e", 95.0, 300.0), Slo("ttft", 95.0, 500.0)))
_CONFIGURE = DeployFact(
    "configure", users=16, at_users=24, bounds=("knee",), why=KneeWhyFact("server", True)
)


def _at_knee(users: int, at_users: int, why: KneeWhyFact, **more: Any) -> DeployFact:
    """A ``configure`` answer bound by the knee at ``at_users``."""
    return DeployFact(
        "configure", users=users, at_users=at_users, bounds=("knee",), why=why, **more
    )


#: case → the deploy answer's fact: every kind, and each branch of its words
DEPLOY = {
    "no stage": DeployFact("no_stage"),
    "none safe, sla": DeployFact("none_safe", at_users=4, bounds=("sla",), why=_SLA),
    "none safe, knee and errors, first reason": DeployFact(
        "none_safe", at_users=1, bounds=("knee", "errors"), why=NoSignalFact()
    ),
    "none safe, nothing said": DeployFact(
        "none_safe", at_users=2, bounds=("knee", "sla", "memory"), why=None
    ),
    "configure, the curve": _at_knee(16, 24, KneeWhyFact("none", curve=True)),
    "configure, the server's queue": _at_knee(16, 24, KneeWhyFact("server", False)),
    "configure, the client's queue and the curve": DeployFact(
        "configure",
        users=16,
        at_users=24,
        bounds=("knee", "memory"),
        why=KneeWhyFact("client", True),
    ),
    "configure, errors": DeployFact(
        "configure", users=8, at_users=12, bounds=("errors",), why=_ERRORS
    ),
    "configure, refusals": DeployFact(
        "configure", users=10, at_users=11, bounds=("refusals",), why=_REFUSALS
    ),
    "configure, capped": _at_knee(8, 12, KneeWhyFact("server", True), cap_users=8),
    "configure, capped by the server's slots": _at_knee(
        8, 12, KneeWhyFact("server", True), cap_users=8, server_slots=8.0
    ),
    "configure, soft knee": _at_knee(
        8, 32, KneeWhyFact("none", True), departed_users=16, departed_tail=_TAIL, batch_users=24
    ),
    "configure, the tail already departed": _at_knee(
        16, 24, KneeWhyFact("none", True), tail_note=_TAIL
    ),
    "no hard knee": DeployFact(
        "no_hard_knee", users=24, top_users=64, departed_users=32, departed_tail=_TAIL
    ),
    "no hard knee, tail departed at the first stage": DeployFact(
        "no_hard_knee_low", top_users=64, departed_users=1, departed_tail=_TAIL
    ),
    "tested range": DeployFact("tested_range", top_users=16),
    "tested range, one user": DeployFact("tested_range", top_users=1),
    "slo, none meets them": DeployFact("slo_none", slo_limits=_TTFT_500),
    "slo, bound": DeployFact("slo_bound", users=6, batch_users=8, slo_limits=_BOTH),
}
#: case → a setting's reason: every kind, and each branch of its words
REASONS = {
    "max_concurrency, before the knee": MaxConcurrencyFact("before_knee", 12),
    "max_concurrency, before the red line": MaxConcurrencyFact("before_red_line", 24),
    "max_concurrency, untested limit": MaxConcurrencyFact("untested_limit"),
    "base_capacity": BaseCapacityFact(True, 85.0),
    "base_capacity, none": BaseCapacityFact(False, 70.0),
    "production_watermark": WatermarkFact("watermark", 0.7, 0.8, 24),
    "interactive_max_concurrency": WatermarkFact("interactive", 0.7, 0.8, 24),
    "offline, at the knee": OfflineFact("at_knee", 12),
    "offline, the knee unclean": OfflineFact("knee_unclean", 12),
    "offline, no knee": OfflineFact("no_knee"),
    "queue_timeout_ms": QueueTimeoutFact("P95", 681.6859, 3.0),
    "queue_timeout_ms, median": QueueTimeoutFact("median", 1250.4, 2.5),
    "request_timeout_ms, tpot": RequestTimeoutFact(
        "tpot", 12, 64.0, 1859.05, 1.5, ttft_p95_ms=939.06, tpot_p95_ms=14.3749
    ),
    "request_timeout_ms, per token": RequestTimeoutFact(
        "per_token", 16, 1024.0, 40960.0, 1.5, ms_per_token=20.0, tail_ratio=2.0
    ),
    "cap from the knee": CapFact(8, "knee", 16, 4),
    "cap from the red line": CapFact(24, "red_line", 32, 1),
    "the server's own limit": OwnLimitFact("--max-num-seqs", 8, 15.527, 43, 85.0),
    "the server's own limit, its KV pool": OwnLimitFact(
        "--max-num-seqs", 8, 15.527, 72, 85.0, pool_tokens=16384, request_tokens=192.0
    ),
    "the server's own limit, a soft knee's answer": OwnLimitFact(
        "--max-num-seqs", 40, 43.6, 72, 85.0, interactive_users=16, offline_users=38
    ),
    "gpu_memory_utilization": GpuMemoryFact(0.85, False, 0.8),
    "gpu_memory_utilization, assumed": GpuMemoryFact(0.9, True, 0.85),
    "max_model_len": ModelLenFact(3500.0, 5000.0, 1.25),
    "replicas, measured": ReplicasFact(100, 25, 0.65, True),
    "replicas, assumed": ReplicasFact(100, 25, 1.0, False),
    "slo_capacity": SloAdviceFact("slo_capacity", slo_limits=_E2E_300, capacity=6),
    "slo_capacity, in doubt": SloAdviceFact(
        "slo_capacity", slo_limits=_E2E_300, capacity=6, doubt=CapacityDoubt(breaker_noisy_users=8)
    ),
    "slo_capacity, none": SloAdviceFact("slo_capacity", slo_limits=_E2E_300),
    "binding, latency": SloAdviceFact("binding", capacity=6, binding="latency", max_concurrency=8),
    "binding, throughput": SloAdviceFact(
        "binding", capacity=16, binding="throughput", max_concurrency=8
    ),
    "binding, none": SloAdviceFact("binding", binding="none"),
    "interactive, the slo": SloAdviceFact("interactive", slo_limits=_E2E_300, capacity=6),
    "replicas, the slo": SloAdviceFact(
        "replicas", binding="latency", target=100, per_replica=6, from_slo=True, efficiency=1.0
    ),
    "replicas, the watermark": SloAdviceFact(
        "replicas", binding="throughput", target=100, per_replica=5, efficiency=0.65
    ),
}
#: case → a setting withheld: every kind, and each branch of its words
WITHHELD = {
    "not saturated": WithheldFact(
        "not_saturated", top_users=16, host="http://127.0.0.1:8000", levels=(16, 32, 48, 64)
    ),
    "unknown engine, its own limit": WithheldFact("unknown_engine", slots=8, cap=8),
    "unknown engine, the cap": WithheldFact("unknown_engine", cap=12),
    "already at its cap": WithheldFact("already_at_cap", cap=8, flag="--parallel"),
    "the server refuses above its limit": WithheldFact("refuses", cap=10),
    "small log": WithheldFact(
        "small_log", records=20, min_records=1000, longest_tokens=950, rule="max_model_len"
    ),
    "small log, size unknown": WithheldFact(
        "small_log", min_records=1000, longest_tokens=3500, rule="max_model_len"
    ),
}

_KNEE = KneeResult((), 5, 12, None, None, 8, 8, "", params={"memory_pressure_pct": 70.0})
#: the other capacity figures of --explain: with every figure, and with none
CONTEXTS = (
    ("every figure", _KNEE, [5, 6]),
    ("none", KneeResult((), None, None, None, None, None, None, ""), None),
)


def _text() -> str:
    lines = [f"deploy, {case}: {deploy_text(DeployAnswer(None, 'knee', f))}" for case, f in
             DEPLOY.items()]  # fmt: skip
    said = DeployAnswer(8, "knee", "configure 8 concurrent requests (read from knee.json)")
    lines.append(f"deploy, words read back: {deploy_text(said)}")
    lines += [f"bound by, {case}: {deploy_bound_text(DeployAnswer(f.users, f.bounds[0], f))}"
              for case, f in DEPLOY.items() if f.kind == "configure"]  # fmt: skip
    lines.append(f"bound by, words read back: {deploy_bound_text(said)}")
    lines += [f"{case}: {reason_words(fact)}" for case, fact in REASONS.items()]
    lines += [f"fix, {case}: {flag_words(Recommendation('vllm.max_num_seqs', f.predicted, f))}"
              for case, f in REASONS.items() if isinstance(f, OwnLimitFact)]  # fmt: skip
    item = Recommendation("deploy_concurrency", 16, _CONFIGURE)
    lines.append(f"deploy_concurrency: {reason_words(item.reason)}")
    lines += [f"withheld, {case}: {withheld_text(f)}" for case, f in WITHHELD.items()]
    lines.append(f"withheld, words read back: {withheld_text('--x withheld: as written')}")
    lines.append(f"sweep command: {sweep_command('URL', (4, 8))}")
    for case, knee, watermark in CONTEXTS:
        lines += [f"context, {case}: {line}" for line in context_lines(knee, watermark)]
    return "\n".join(lines) + "\n"


def test_every_advice_fact_kind_has_its_golden_words() -> None:
    text = _text()
    check_golden("advice_words.txt", text)
