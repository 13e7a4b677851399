"""The bottleneck rules one by one: each reads a stage's facts and returns its reason or None.

:mod:`analysis.diagnosis.bottleneck` holds the ordered table of these functions and the docstring
that names each rule's reading; here each rule is a few lines on :class:`StageFacts`, the
numbers of one stage read once. A rule checks only its own condition: which rule wins when two
match is the table's order, not a guard inside the function.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from analysis import rules
from analysis.diagnosis.failure_mix import FailureMix
from analysis.knee.refusal_signal import REFUSALS
from analysis.model import Baseline, StageVerdict
from analysis.numeric import cell, fmt


@dataclass(frozen=True)
class DiagnosisParams:
    """Thresholds of :func:`analysis.diagnosis.bottleneck.diagnose` (its module docstring lists the
    rules)."""

    memory_full_pct: float = 95.0
    idle_share_pct: float = 20.0
    prefill_ttft_ratio: float = 2.0
    itl_normal_ratio: float = 1.5
    sm_low_pct: float = 40.0
    compute_util_pct: float = 90.0
    low_util_pct: float = 50.0
    queue_waiting_min: float = 0.5


@dataclass(frozen=True)
class StageFacts:
    """One stage as the rules see it: its row, its neighbours and the numbers read off them once."""

    row: pd.Series
    verdict: StageVerdict
    prev: pd.Series | None  # the stage before (the baseline stage for the first step)
    base_row: pd.Series | None  # the baseline stage's row, for decode-speed ratios
    baseline: Baseline
    params: DiagnosisParams
    mem: float | None  # the memory % the knee judged (:func:`judged_memory`)
    mem_name: str  # which figure ``mem`` is
    util: float | None  # GPU utilisation mean %
    idle: float | None  # share of GPU samples at or near 0 % utilisation
    waiting: float | None  # the server's waiting queue, mean over the stage
    departed: bool  # the tail departed (or the SLA broke)
    flat: bool  # throughput flattened or its gain narrowed
    saturated: bool = False  # the server's own counters: at its most running, requests waiting
    failures: FailureMix | None = None  # the stage's failures by kind (None: none, or unknown)


def _fired(verdict: StageVerdict, name: str) -> bool:
    return any(s.name == name and s.fired for s in verdict.signals)


def judged_memory(row: pd.Series, verdict: StageVerdict) -> tuple[float | None, str]:
    """The memory % the knee judged the stage by (its memory-pressure signal: KV-cache or GPU
    memory, chosen by ``--knee-memory-source``; a pre-allocated pool gives none), and its name."""
    value = next((s.value for s in verdict.signals if s.name == "memory_pressure"), None)
    if value is None:
        return None, "memory"
    if value == cell(row, "kv_cache_peak_pct"):
        return value, "KV-cache"
    return value, "GPU memory"


def stage_facts(
    row: pd.Series,
    verdict: StageVerdict,
    *,
    prev: pd.Series | None,
    base_row: pd.Series | None,
    baseline: Baseline,
    params: DiagnosisParams,
    failures: FailureMix | None = None,
) -> StageFacts:
    """Read once the numbers several rules share, so each rule stays a few lines."""
    mem, mem_name = judged_memory(row, verdict)
    return StageFacts(
        row=row,
        verdict=verdict,
        prev=prev,
        base_row=base_row,
        baseline=baseline,
        params=params,
        mem=mem,
        mem_name=mem_name,
        util=cell(row, "gpu_util_mean_pct"),
        idle=cell(row, "gpu_idle_pct"),
        waiting=cell(row, "waiting_mean"),
        departed=_fired(verdict, "tail_departure") or _fired(verdict, "sla"),
        flat=_fired(verdict, "throughput_flattening") or _fired(verdict, "gain_narrowing"),
        saturated=_fired(verdict, "server_saturated"),
        failures=failures,
    )


def client_bound(s: StageFacts) -> str | None:
    if s.verdict.trusted:
        return None
    return (
        f"load-generator CPU peaked at {fmt(cell(s.row, 'client_cpu_peak_pct'), ' %')} of a core: "
        "the client, not the server, may be the limit; use more Locust workers before trusting "
        "this stage"
    )


def memory_full(s: StageFacts) -> str | None:
    preempt, full = cell(s.row, "preemptions"), s.params.memory_full_pct
    crashed = _fired(s.verdict, "oom")
    if not (crashed or (s.mem is not None and s.mem >= full) or (preempt or 0) > 0):
        return None
    return (
        f"{s.mem_name} peaked at {fmt(s.mem, ' %')} (full at {full:g} %), {fmt(preempt)} "
        f"preemptions, GPU idle in {fmt(s.idle, ' %')} of samples: memory is the limit "
        "(swapping / recomputation, OOM next); lower --gpu-memory-utilization or "
        "--max-model-len, or cap --max-num-seqs"
    )


def failing(s: StageFacts) -> str | None:
    """Failures are what the stage is about: the error red line, or errors with no other sign."""
    mix = s.failures
    if mix is None or not mix.failed:
        return None
    red = _fired(s.verdict, "error_rate") or _fired(s.verdict, REFUSALS)  # the red line's slot
    if not red and (s.departed or s.flat):
        return None  # a knee that also dropped a few requests: the capacity rules explain it
    family = mix.family
    if family == "overload":
        share = fmt(mix.pct(mix.overload), " %")
        return (
            f"{share} of requests were turned away with HTTP 429/503 ({mix.text}): the server "
            "is overloaded (its waiting queue is full, or it is restarting); lower the "
            "concurrency or raise the server's queue limit " + rules.cite("failing")
        )
    if family == "stalls":
        share = fmt(mix.pct(mix.stalls), " %")
        return (
            f"{share} of requests timed out while the served ones kept an e2e P95 of "
            f"{fmt(cell(s.row, 'e2e_p95_ms'), ' ms')} ({mix.text}): the server stalls some "
            "requests (hung or starved streams), which is not queueing; check its logs "
            + rules.cite("failing")
        )
    share = fmt(mix.pct(mix.server_errors), " %")
    return (
        f"{share} of requests failed in the server ({mix.text}): server errors, not a capacity "
        "limit; fix them before reading the knee " + rules.cite("failing")
    )


def gpu_idle(s: StageFacts) -> str | None:
    limit = s.params.idle_share_pct
    if s.idle is None or s.idle < limit or int(s.row["ok"]) <= 0:
        return None
    return (
        f"GPU utilisation was at or near 0 in {fmt(s.idle, ' %')} of samples while requests "
        f"were in flight (limit {limit:g} %): waiting on the host side (CPU "
        "pre-processing, log flushing, network); more concurrency only lengthens the queue"
    )


def server_queue(s: StageFacts) -> str | None:
    """A real waiting queue behind a latency or throughput sign, or behind full slots.

    The server's own counters saying it ran at its most while requests waited is queueing
    whether or not this stage's client-side numbers crossed a threshold: on a noisy box the
    tail can stay inside the noise band at the very stage where the slots filled.
    """
    queued = s.waiting is not None and s.waiting >= s.params.queue_waiting_min
    if not (queued and (s.departed or s.flat or s.saturated)):
        return None
    return (
        f"the server's waiting queue held {fmt(s.waiting)} request"
        f"{'' if s.waiting == 1 else 's'} on average (max "
        f"{fmt(cell(s.row, 'waiting_max'))}) while {s.mem_name} was at {fmt(s.mem, ' %')}: "
        "queueing / KV-cache contention; requests wait for a running slot, which is what "
        "lengthens TTFT and the tail; tune --max-num-seqs (--parallel on llama.cpp) "
        "rather than add GPUs"
    )


def prefill(s: StageFacts) -> str | None:
    ttft, base_ttft = cell(s.row, "ttft_p95_ms"), s.baseline.ttft_p95_ms
    # decode speed: TPOT ((e2e - TTFT) / tokens) rather than the chunk gaps where both exist,
    # since servers that flush chunks in bursts (vLLM on CPU) make ITL medians near 0
    decode_name = "TPOT"
    itl, base_itl = cell(s.row, "tpot_p50_ms"), cell(s.base_row, "tpot_p50_ms")
    if itl is None or not base_itl:
        decode_name = "ITL"
        itl, base_itl = cell(s.row, "itl_p50_ms"), cell(s.base_row, "itl_p50_ms")
    if ttft is None or not base_ttft or itl is None or not base_itl:
        return None
    ttft_ratio, itl_ratio = ttft / base_ttft, itl / base_itl
    if ttft_ratio < s.params.prefill_ttft_ratio or itl_ratio >= s.params.itl_normal_ratio:
        return None
    caveat = (
        " (the server exports no queue gauge, so waiting for a slot would look the same)"
        if s.waiting is None
        else ""
    )
    return (
        f"TTFT P95 {fmt(ttft, ' ms')} is {ttft_ratio:.2g}× the baseline's while the "
        f"{decode_name} median {fmt(itl, ' ms')} is only {itl_ratio:.2g}× its own: "
        "prefill of long inputs is the limit; consider chunked prefill or capping input "
        f"length{caveat}"
    )


def kv_contention(s: StageFacts) -> str | None:
    waiting, prev_waiting = s.waiting, cell(s.prev, "waiting_mean")
    grows = waiting is not None and waiting > 0 and (prev_waiting is None or waiting > prev_waiting)
    sm, sm_low_pct = cell(s.row, "sm_util_mean_pct"), s.params.sm_low_pct
    sm_low = sm is not None and sm < sm_low_pct
    if not (s.departed and (grows or sm_low)):
        return None
    evidence = []
    if grows:
        evidence.append(f"waiting requests grew {fmt(prev_waiting)} → {fmt(waiting)} on average")
    if sm_low:
        evidence.append(f"SM utilisation only {fmt(sm, ' %')} (low under {sm_low_pct:g} %)")
    return (
        f"the tail rose while {s.mem_name} was not full ({fmt(s.mem, ' %')}); "
        + " and ".join(evidence)
        + ": queueing / KV-cache contention; tune --max-num-seqs or enable prefix caching "
        "rather than add GPUs"
    )


def compute_saturated(s: StageFacts) -> str | None:
    high = s.params.compute_util_pct
    if s.util is None or s.util < high or not s.flat:
        return None
    return (
        f"GPU utilisation averaged {fmt(s.util, ' %')} (high at {high:g} %) while "
        "throughput stopped growing: compute is saturated, more concurrency only queues"
    )


def throughput_stuck(s: StageFacts) -> str | None:
    low = s.params.low_util_pct
    if not _fired(s.verdict, "throughput_flattening") or s.util is None or s.util >= low:
        return None
    return (
        f"throughput stopped growing while the GPU was busy only {fmt(s.util, ' %')} of the time "
        f"(low under {low:g} %): the limit is scheduling, the network or the "
        "client's ability to drive the concurrency, not the model; check that the "
        "load generator keeps up"
    )


def empty_queue(s: StageFacts) -> str | None:
    if not (s.flat or s.departed) or s.waiting is None:
        return None
    if s.waiting >= s.params.queue_waiting_min:
        return None
    return (
        f"the server's waiting queue stayed empty ({fmt(s.waiting)} on average) while "
        "throughput stopped keeping pace with users and latency rose: every request "
        "runs, but each decode step slows as the batch grows (compute-bound batching)"
    )


def closed_loop_wait(s: StageFacts) -> str | None:
    if not (s.flat or s.departed):
        return None
    known = (("GPU utilisation", s.util), ("server queue", s.waiting))
    missing = [name for name, value in known if value is None]
    why = f" (no {' or '.join(missing)} data to tell compute from KV contention)" if missing else ""
    return (
        "throughput stopped keeping pace with users while latency rose: requests wait for "
        f"a slot{why}"
    )


def memory_leading(s: StageFacts) -> str | None:
    if not _fired(s.verdict, "memory_pressure"):
        return None
    return (
        f"{s.mem_name} peaked at {fmt(s.mem, ' %')} while latency and throughput still held: "
        "memory is the leading indicator (it fills before latency collapses); the "
        "next stage risks OOM"
    )


def interference(s: StageFacts) -> str | None:
    if not s.baseline.interference_suspected:
        return None
    return (
        "the baseline's P95 was far above its median: something outside the test "
        "(another process on the GPU, network jitter, logging) interferes"
    )
