"""Name the likely bottleneck of each stage from the method's rules and the server metrics.

The rules form one ordered table, :data:`RULES`; each is a small function (in
:mod:`analysis.diagnosis.rules`) of a stage's :class:`StageFacts` that returns what it saw (a
record of :mod:`analysis.diagnosis.facts`, worded by :mod:`analysis.report.diagnosis_words`), or
None when it does not match.
A comfortable stage has nothing to diagnose, except that client-bound is checked on every stage;
on every other stage the rules are tried in this order and the first that matches wins:

1. ``client_bound`` → **client** — the load generator's CPU was at its limit (the stage is
   untrusted; "make sure the client itself can drive the concurrency").
2. ``memory_full`` → **memory** — the knee's OOM signal fired, memory (KV-cache % when present,
   else GPU memory %) at or above ``memory_full_pct``, or the server preempted sequences
   (swapping / recomputation). memory near the limit with utilisation dropping means
   reclamation or swapping; OOM → lower ``--gpu-memory-utilization`` /
   ``--max-model-len``.
3. ``failing`` → **overload** / **stalls** / **server_errors** — the errors are what the stage
   is about (the error red line fired, or errors are its only sign): named by the largest family
   of its failures (:mod:`analysis.diagnosis.failure_mix`): HTTP 429/503 rejections are overload,
   timeouts
   are stalls (not queueing: the served requests may stay fast), anything else (500s, resets,
   cut streams, malformed lines, error objects) is server errors.
4. ``gpu_idle`` → **host_side** — the GPU sat idle (utilisation ≤ 5 %) in at least
   ``idle_share_pct`` of the samples while users had requests in flight (waiting on
   CPU pre-processing, log flushing or the network; more concurrency only lengthens the queue).
5. ``server_queue`` → **queueing** — the tail departed, throughput flattened or the server
   reported itself saturated (at its most running) while its own waiting queue held at least
   ``queue_waiting_min`` requests on average: TTFT then grows by the time spent waiting for a
   slot, which must not be mistaken for slow prefill.
6. ``prefill`` → **prefill** — TTFT P95 at least ``prefill_ttft_ratio``× the baseline's while
   the decode time (TPOT median; the ITL median when there is no TPOT) stays under
   ``itl_normal_ratio``× the baseline stage's and the server's queue gauge shows no queue that
   explains it (long inputs slow the prefill; consider chunked prefill or capping input
   length). Without a queue gauge it never matches: a wait for a slot looks the same and is
   the common cause, so the stage falls to ``closed_loop_wait``.
7. ``kv_contention`` → **queueing** — the tail departed while memory is not full, and the
   waiting queue grew, or SM utilisation stayed under ``sm_low_pct`` (KV-cache
   contention; tune ``--max-num-seqs`` or prefix caching rather than add GPUs).
8. ``compute_saturated`` → **compute** — GPU utilisation at or above ``compute_util_pct`` with
   throughput flat or narrowing (compute is saturated; more concurrency only queues).
9. ``throughput_stuck`` → **host_side** — throughput flat while GPU utilisation stays under
   ``low_util_pct`` (scheduling, network or a client that cannot drive the load).
10. ``empty_queue`` → **compute** (inferred) — throughput flat or the tail departed, no rule
   above matched and the server's queue is known to be empty: every request runs and each decode
   step slows as the batch grows.
11. ``closed_loop_wait`` → **queueing** (inferred) — throughput flat or the tail departed and no
   rule above matched: in a closed loop requests wait (the reason says which data was missing).
12. ``memory_leading`` → **memory** — only the memory-pressure signal fired: memory fills
   before latency collapses.
13. ``interference`` → **interference** — the baseline's P95 was far above its median.

A stage that matches none is ``none`` (:class:`~analysis.diagnosis.facts.NoRuleFact`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import pandas as pd

from analysis.diagnosis.facts import DiagnosisFact, FailingFact, FailureMix, NoRuleFact
from analysis.diagnosis.rules import (
    DiagnosisParams,
    StageFacts,
    client_bound,
    closed_loop_wait,
    compute_saturated,
    empty_queue,
    failing,
    gpu_idle,
    interference,
    kv_contention,
    memory_full,
    memory_leading,
    prefill,
    server_queue,
    stage_facts,
    throughput_stuck,
)
from analysis.model import Baseline, Bottleneck, KneeResult

__all__ = [
    "RULES",
    "DiagnosisParams",
    "Rule",
    "StageFacts",
    "diagnose",
    "diagnose_stage",
    "first_match",
    "stage_facts",
]


@dataclass(frozen=True)
class Rule:
    """One row of the table: its name, the bottleneck it names, and its test."""

    name: str
    bottleneck: Bottleneck
    check: Callable[[StageFacts], DiagnosisFact | None]  # what it saw when it matches, else None


#: the rules in the order they are tried (the module docstring lists them with their sources)
RULES: tuple[Rule, ...] = (
    Rule("client_bound", "client", client_bound),
    Rule("memory_full", "memory", memory_full),
    Rule("failing", "overload", failing),  # the bottleneck follows the failures' family
    Rule("gpu_idle", "host_side", gpu_idle),
    Rule("server_queue", "queueing", server_queue),
    Rule("prefill", "prefill", prefill),
    Rule("kv_contention", "queueing", kv_contention),
    Rule("compute_saturated", "compute", compute_saturated),
    Rule("throughput_stuck", "host_side", throughput_stuck),
    Rule("empty_queue", "compute", empty_queue),
    Rule("closed_loop_wait", "queueing", closed_loop_wait),
    Rule("memory_leading", "memory", memory_leading),
    Rule("interference", "interference", interference),
)


def first_match(
    facts: StageFacts, rules: tuple[Rule, ...] = RULES
) -> tuple[Rule, DiagnosisFact] | None:
    """The first rule of ``rules`` that matches the stage, with what it saw; None when none does."""
    for rule in rules:
        reason = rule.check(facts)
        if reason is not None:
            return rule, reason
    return None


def diagnose_stage(facts: StageFacts) -> tuple[Bottleneck, DiagnosisFact | None]:
    """The bottleneck of one stage and what the rule behind it saw (None: nothing to diagnose)."""
    if facts.verdict.trusted and facts.verdict.verdict == "comfortable":
        return "none", None
    if facts.verdict.verdict == "insufficient_data":  # no numbers to read a bottleneck from
        return "none", None
    match = first_match(facts)
    if match is None:
        return "none", NoRuleFact()
    rule, reason = match
    if isinstance(reason, FailingFact):  # the bottleneck follows the failures' family
        return reason.family, reason
    return rule.bottleneck, reason


def diagnose(
    summary: pd.DataFrame,
    knee: KneeResult,
    baseline: Baseline,
    *,
    params: DiagnosisParams | None = None,
    failures: Mapping[int, FailureMix] | None = None,
) -> KneeResult:
    """``knee`` with each StageVerdict's ``bottleneck`` and ``bottleneck_reason`` (what its rule
    saw) filled in."""
    params = params or DiagnosisParams()
    rows = {int(r["stage"]): r for _, r in summary.iterrows()}
    base_row = rows.get(baseline.stage) if baseline.stage is not None else None
    updated = []
    prev: pd.Series | None = base_row if baseline.source == "baseline" else None
    for verdict in knee.stages:
        row = rows[verdict.stage]
        facts = stage_facts(
            row,
            verdict,
            prev=prev,
            base_row=base_row,
            baseline=baseline,
            params=params,
            failures=(failures or {}).get(verdict.stage),
        )
        bottleneck, reason = diagnose_stage(facts)
        said = "" if reason is None else reason
        updated.append(replace(verdict, bottleneck=bottleneck, bottleneck_reason=said))
        prev = row
    return replace(knee, stages=tuple(updated))
