"""Name the likely bottleneck of each stage from the rules of both seeds and the server metrics.

Rules, tried in this order on every stage that is not comfortable (the first that matches wins;
client-bound is checked on every stage):

1. **client** — the load generator's CPU was at its limit (the stage is untrusted; seed 002:
   "make sure the client itself can drive the concurrency").
2. **memory** — the knee's OOM signal fired, memory (KV-cache % when present, else GPU
   memory %) at or above ``memory_full_pct``, or the server preempted sequences (swapping /
   recomputation). Seed 000: memory near the limit with utilisation dropping means reclamation
   or swapping; seed 002: OOM → lower ``--gpu-memory-utilization`` / ``--max-model-len``.
3. **host_side** — the GPU sat idle (utilisation ≤ 5 %) in at least ``idle_share_pct`` of the
   samples while users had requests in flight (seed 000: waiting on CPU pre-processing, log
   flushing or the network; more concurrency only lengthens the queue).
4. **queueing** (server queue) — the tail departed or throughput flattened while the server's
   own waiting queue held at least ``queue_waiting_min`` requests on average: TTFT then grows by
   the time spent waiting for a slot, which must not be mistaken for slow prefill.
5. **prefill** — TTFT P95 at least ``prefill_ttft_ratio``× the baseline's while the decode time
   (TPOT median; the ITL median when there is no TPOT) stays under ``itl_normal_ratio``× the
   baseline stage's and no server queue explains it (seed 002: long inputs slow the prefill;
   consider chunked prefill or capping input length).
6. **queueing** — the tail departed while memory is not full, and the waiting queue grew, or SM
   utilisation stayed under ``sm_low_pct`` (seed 002: KV-cache contention; tune ``--max-num-seqs``
   or prefix caching rather than add GPUs).
7. **compute** — GPU utilisation at or above ``compute_util_pct`` with throughput flat or
   narrowing (seed 000: compute is saturated; more concurrency only queues).
8. **host_side** (throughput stuck) — throughput flat while GPU utilisation stays under
   ``low_util_pct`` (seed 002: scheduling, network or a client that cannot drive the load).
9. **compute** / **queueing** (inferred) — throughput flat or the tail departed and no rule above
   matched: with the server's queue known to be empty, every request runs and each decode step
   slows as the batch grows (compute); without queue data, in a closed loop requests wait (the
   reason says which data was missing).
10. **memory** (leading) — only the memory-pressure signal fired: memory fills before latency
   collapses (seed 002).
11. **interference** — the baseline's P95 was far above its median (seed 000).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd

from analysis.baseline import interference_suspected
from analysis.model import Baseline, Bottleneck, KneeResult, StageVerdict


@dataclass(frozen=True)
class DiagnosisParams:
    """Thresholds of :func:`diagnose` (see the module docstring)."""

    memory_full_pct: float = 95.0
    idle_share_pct: float = 20.0
    prefill_ttft_ratio: float = 2.0
    itl_normal_ratio: float = 1.5
    sm_low_pct: float = 40.0
    compute_util_pct: float = 90.0
    low_util_pct: float = 50.0
    queue_waiting_min: float = 0.5


def _num(row: pd.Series | None, name: str) -> float | None:
    if row is None or name not in row.index:
        return None
    value = row[name]
    if value is None or pd.isna(value):
        return None
    return float(value)


def _f(value: float | None, unit: str = "") -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:,.4g}{unit}"


def _fired(verdict: StageVerdict, name: str) -> bool:
    return any(s.name == name and s.fired for s in verdict.signals)


def _memory(row: pd.Series) -> tuple[float | None, str]:
    kv = _num(row, "kv_cache_peak_pct")
    return (kv, "KV-cache") if kv is not None else (_num(row, "gpu_mem_peak_pct"), "GPU memory")


def diagnose_stage(
    row: pd.Series,
    verdict: StageVerdict,
    *,
    prev: pd.Series | None,
    base_row: pd.Series | None,
    baseline: Baseline,
    params: DiagnosisParams,
) -> tuple[Bottleneck, str]:
    """The bottleneck of one stage and the rule behind it, in words with the numbers."""
    p = params
    if not verdict.trusted:
        cpu = _num(row, "client_cpu_peak_pct")
        return "client", (
            f"load-generator CPU peaked at {_f(cpu, ' %')} of a core: the client, not the server, "
            "may be the limit; use more Locust workers before trusting this stage"
        )
    if verdict.verdict == "comfortable":
        return "none", ""
    mem, what = _memory(row)
    preempt = _num(row, "preemptions")
    util = _num(row, "gpu_util_mean_pct")
    idle = _num(row, "gpu_idle_pct")
    crashed = _fired(verdict, "oom")
    if crashed or (mem is not None and mem >= p.memory_full_pct) or (preempt or 0) > 0:
        return "memory", (
            f"{what} peaked at {_f(mem, ' %')} (full at {p.memory_full_pct:g} %), "
            f"{_f(preempt)} preemptions, GPU idle in {_f(idle, ' %')} of samples: memory is the "
            "limit (swapping / recomputation, OOM next); lower --gpu-memory-utilization or "
            "--max-model-len, or cap --max-num-seqs"
        )
    if idle is not None and idle >= p.idle_share_pct and int(row["ok"]) > 0:
        return "host_side", (
            f"GPU utilisation was at or near 0 in {_f(idle, ' %')} of samples while requests "
            f"were in flight (limit {p.idle_share_pct:g} %): waiting on the host side (CPU "
            "pre-processing, log flushing, network); more concurrency only lengthens the queue"
        )
    departed = _fired(verdict, "tail_departure") or _fired(verdict, "sla")
    flat = _fired(verdict, "throughput_flattening") or _fired(verdict, "gain_narrowing")
    waiting, prev_waiting = _num(row, "waiting_mean"), _num(prev, "waiting_mean")
    queued = waiting is not None and waiting >= p.queue_waiting_min
    if queued and (departed or flat):
        return "queueing", (
            f"the server's waiting queue held {_f(waiting)} requests on average (max "
            f"{_f(_num(row, 'waiting_max'))}) while {what} was at {_f(mem, ' %')}: "
            "queueing / KV-cache contention; requests wait for a running slot, which is what "
            "lengthens TTFT and the tail; tune --max-num-seqs (--parallel on llama.cpp) "
            "rather than add GPUs"
        )
    ttft, base_ttft = _num(row, "ttft_p95_ms"), baseline.ttft_p95_ms
    # decode speed: TPOT ((e2e - TTFT) / tokens) rather than the chunk gaps where both exist,
    # since servers that flush chunks in bursts (vLLM on CPU) make ITL medians near 0
    decode_name = "TPOT"
    itl, base_itl = _num(row, "tpot_p50_ms"), _num(base_row, "tpot_p50_ms")
    if itl is None or not base_itl:
        decode_name = "ITL"
        itl, base_itl = _num(row, "itl_p50_ms"), _num(base_row, "itl_p50_ms")
    if ttft is not None and base_ttft and itl is not None and base_itl:
        ttft_ratio, itl_ratio = ttft / base_ttft, itl / base_itl
        if ttft_ratio >= p.prefill_ttft_ratio and itl_ratio < p.itl_normal_ratio:
            caveat = (
                " (the server exports no queue gauge, so waiting for a slot would look the same)"
                if waiting is None
                else ""
            )
            return "prefill", (
                f"TTFT P95 {_f(ttft, ' ms')} is {ttft_ratio:.2g}× the baseline's while the "
                f"{decode_name} median {_f(itl, ' ms')} is only {itl_ratio:.2g}× its own: "
                "prefill of long inputs is the limit; consider chunked prefill or capping input "
                f"length{caveat}"
            )
    grows = waiting is not None and waiting > 0 and (prev_waiting is None or waiting > prev_waiting)
    sm = _num(row, "sm_util_mean_pct")
    sm_low = sm is not None and sm < p.sm_low_pct
    if departed and (grows or sm_low):
        evidence = []
        if grows:
            evidence.append(f"waiting requests grew {_f(prev_waiting)} → {_f(waiting)} on average")
        if sm_low:
            evidence.append(f"SM utilisation only {_f(sm, ' %')} (low under {p.sm_low_pct:g} %)")
        return "queueing", (
            f"the tail rose while {what} was not full ({_f(mem, ' %')}); "
            + " and ".join(evidence)
            + ": queueing / KV-cache contention; tune --max-num-seqs or enable prefix caching "
            "rather than add GPUs"
        )
    if util is not None and util >= p.compute_util_pct and flat:
        return "compute", (
            f"GPU utilisation averaged {_f(util, ' %')} (high at {p.compute_util_pct:g} %) while "
            "throughput stopped growing: compute is saturated, more concurrency only queues"
        )
    stuck = _fired(verdict, "throughput_flattening")
    if stuck and util is not None and util < p.low_util_pct:
        return "host_side", (
            f"throughput stopped growing while the GPU was busy only {_f(util, ' %')} of the time "
            f"(low under {p.low_util_pct:g} %): the limit is scheduling, the network or the "
            "client's ability to drive the concurrency, not the model (seed 002); check that the "
            "load generator keeps up"
        )
    if flat or departed:
        missing = [
            name
            for name, value in (("GPU utilisation", util), ("server queue", waiting))
            if value is None
        ]
        why = (
            f" (no {' or '.join(missing)} data to tell compute from KV contention)"
            if missing
            else ""
        )
        if waiting is not None and waiting < p.queue_waiting_min:
            return "compute", (
                f"the server's waiting queue stayed empty ({_f(waiting)} on average) while "
                "throughput stopped keeping pace with users and latency rose: every request "
                "runs, but each decode step slows as the batch grows (compute-bound batching)"
            )
        return "queueing", (
            "throughput stopped keeping pace with users while latency rose: requests wait for "
            f"a slot{why}"
        )
    if _fired(verdict, "memory_pressure"):
        return "memory", (
            f"{what} peaked at {_f(mem, ' %')} while latency and throughput still held: memory "
            "is the leading indicator (seed 002: it fills before latency collapses); the next "
            "stage risks OOM"
        )
    if interference_suspected(baseline):
        return "interference", (
            "the baseline's P95 was far above its median: something outside the test "
            "(another process on the GPU, network jitter, logging) interferes"
        )
    return "none", "no bottleneck rule matched"


def diagnose(
    summary: pd.DataFrame,
    knee: KneeResult,
    baseline: Baseline,
    *,
    params: DiagnosisParams | None = None,
) -> KneeResult:
    """``knee`` with each StageVerdict's ``bottleneck`` and ``bottleneck_reason`` filled in."""
    params = params or DiagnosisParams()
    rows = {int(r["stage"]): r for _, r in summary.iterrows()}
    base_row = rows.get(baseline.stage) if baseline.stage is not None else None
    updated = []
    prev: pd.Series | None = base_row if baseline.source == "baseline" else None
    for verdict in knee.stages:
        row = rows[verdict.stage]
        bottleneck, reason = diagnose_stage(
            row, verdict, prev=prev, base_row=base_row, baseline=baseline, params=params
        )
        updated.append(replace(verdict, bottleneck=bottleneck, bottleneck_reason=reason))
        prev = row
    return replace(knee, stages=tuple(updated))
