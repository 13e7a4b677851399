"""The bottleneck rules one by one: each reads a stage's facts and returns what it saw or None.

:mod:`analysis.diagnosis.bottleneck` holds the ordered table of these functions and the docstring
that names each rule's reading; here each rule is a few lines on :class:`StageFacts`, the
numbers of one stage read once. A rule checks only its own condition: which rule wins when two
match is the table's order, not a guard inside the function. What a rule saw is a record of
:mod:`analysis.diagnosis.facts`; :mod:`analysis.report.diagnosis_words` words it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from analysis.diagnosis import facts
from analysis.knee.refusal_signal import REFUSALS
from analysis.model import Baseline, StageVerdict
from loadknee_core.numeric import cell


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
    memory: facts.MemorySeen  # which figure ``mem`` is
    util: float | None  # GPU utilisation mean %
    idle: float | None  # share of GPU samples at or near 0 % utilisation
    waiting: float | None  # the server's waiting queue, mean over the stage
    departed: bool  # the tail departed (or the SLA broke)
    flat: bool  # throughput flattened or its gain narrowed
    saturated: bool = False  # the server's own counters: at its most running, requests waiting
    failures: facts.FailureMix | None = (
        None  # the stage's failures by kind (None: none, or unknown)
    )


def _fired(verdict: StageVerdict, name: str) -> bool:
    return any(s.name == name and s.fired for s in verdict.signals)


def judged_memory(row: pd.Series, verdict: StageVerdict) -> tuple[float | None, facts.MemorySeen]:
    """The memory % the knee judged the stage by (its memory-pressure signal: KV-cache or GPU
    memory, chosen by ``--knee-memory-source``; a pre-allocated pool gives none), and which."""
    value = next((s.value for s in verdict.signals if s.name == "memory_pressure"), None)
    if value is None:
        return None, "unknown"
    if value == cell(row, "kv_cache_peak_pct"):
        return value, "kv_cache"
    return value, "gpu"


def stage_facts(
    row: pd.Series,
    verdict: StageVerdict,
    *,
    prev: pd.Series | None,
    base_row: pd.Series | None,
    baseline: Baseline,
    params: DiagnosisParams,
    failures: facts.FailureMix | None = None,
) -> StageFacts:
    """Read once the numbers several rules share, so each rule stays a few lines."""
    mem, memory = judged_memory(row, verdict)
    return StageFacts(
        row=row,
        verdict=verdict,
        prev=prev,
        base_row=base_row,
        baseline=baseline,
        params=params,
        mem=mem,
        memory=memory,
        util=cell(row, "gpu_util_mean_pct"),
        idle=cell(row, "gpu_idle_pct"),
        waiting=cell(row, "waiting_mean"),
        departed=_fired(verdict, "tail_departure") or _fired(verdict, "sla"),
        flat=_fired(verdict, "throughput_flattening") or _fired(verdict, "gain_narrowing"),
        saturated=_fired(verdict, "server_saturated"),
        failures=failures,
    )


def client_bound(s: StageFacts) -> facts.ClientBoundFact | None:
    if s.verdict.trusted:
        return None
    return facts.ClientBoundFact(cell(s.row, "client_cpu_peak_pct"))


def memory_full(s: StageFacts) -> facts.MemoryFullFact | None:
    preempt, full = cell(s.row, "preemptions"), s.params.memory_full_pct
    crashed = _fired(s.verdict, "oom")
    if not (crashed or (s.mem is not None and s.mem >= full) or (preempt or 0) > 0):
        return None
    return facts.MemoryFullFact(s.memory, s.mem, full, preempt, s.idle)


def failing(s: StageFacts) -> facts.FailingFact | None:
    """Failures are what the stage is about: the error red line, or errors with no other sign."""
    mix = s.failures
    if mix is None or not mix.failed:
        return None
    red = _fired(s.verdict, "error_rate") or _fired(s.verdict, REFUSALS)  # the red line's slot
    if not red and (s.departed or s.flat):
        return None  # a knee that also dropped a few requests: the capacity rules explain it
    family = mix.family
    share = mix.pct(mix.count(family))
    return facts.FailingFact(family, share, mix, cell(s.row, "e2e_p95_ms"))


def gpu_idle(s: StageFacts) -> facts.GpuIdleFact | None:
    limit = s.params.idle_share_pct
    if s.idle is None or s.idle < limit or int(s.row["ok"]) <= 0:
        return None
    return facts.GpuIdleFact(s.idle, limit)


def server_queue(s: StageFacts) -> facts.ServerQueueFact | None:
    """A real waiting queue behind a latency or throughput sign, or behind full slots.

    The server's own counters saying it ran at its most while requests waited is queueing
    whether or not this stage's client-side numbers crossed a threshold: on a noisy box the
    tail can stay inside the noise band at the very stage where the slots filled.
    """
    least = s.params.queue_waiting_min
    if s.waiting is None or s.waiting < least or not (s.departed or s.flat or s.saturated):
        return None
    return facts.ServerQueueFact(
        "server_queue", s.waiting, least, cell(s.row, "waiting_max"), s.memory, s.mem
    )


def prefill(s: StageFacts) -> facts.PrefillFact | None:
    """TTFT far above the baseline's with the decode speed held, and the server's own queue
    gauge showing too little waiting to explain it (:func:`server_queue` comes first).

    Without a queue gauge the rule says nothing: a request that waits for a slot and one whose
    prefill is slow look the same from the client, and the wait is the common cause (a
    simulator with 6 slots, its ``/metrics`` hidden, read "prefill: TTFT P95 12× the
    baseline's" at 12 users on fixed 128-token prompts). The stage then falls to the queueing
    the closed loop implies (:func:`closed_loop_wait`), which says which data was missing.
    """
    if s.waiting is None:
        return None
    ttft, base_ttft = cell(s.row, "ttft_p95_ms"), s.baseline.ttft_p95_ms
    # decode speed: TPOT ((e2e - TTFT) / tokens) rather than the chunk gaps where both exist,
    # since servers that flush chunks in bursts (vLLM on CPU) make ITL medians near 0
    decode: facts.DecodeFigure = "tpot"
    itl, base_itl = cell(s.row, "tpot_p50_ms"), cell(s.base_row, "tpot_p50_ms")
    if itl is None or not base_itl:
        decode = "itl"
        itl, base_itl = cell(s.row, "itl_p50_ms"), cell(s.base_row, "itl_p50_ms")
    if ttft is None or not base_ttft or itl is None or not base_itl:
        return None
    ttft_ratio, itl_ratio = ttft / base_ttft, itl / base_itl
    if ttft_ratio < s.params.prefill_ttft_ratio or itl_ratio >= s.params.itl_normal_ratio:
        return None
    return facts.PrefillFact(
        ttft_p95_ms=ttft,
        ttft_ratio=ttft_ratio,
        decode=decode,
        decode_p50_ms=itl,
        decode_ratio=itl_ratio,
        ttft_threshold_ratio=s.params.prefill_ttft_ratio,
        decode_threshold_ratio=s.params.itl_normal_ratio,
    )


def kv_contention(s: StageFacts) -> facts.KvContentionFact | None:
    waiting, prev_waiting = s.waiting, cell(s.prev, "waiting_mean")
    grows = waiting is not None and waiting > 0 and (prev_waiting is None or waiting > prev_waiting)
    sm, sm_low_pct = cell(s.row, "sm_util_mean_pct"), s.params.sm_low_pct
    sm_low = sm is not None and sm < sm_low_pct
    if not (s.departed and (grows or sm_low)):
        return None
    return facts.KvContentionFact(
        memory=s.memory,
        memory_pct=s.mem,
        waiting_grew=grows,
        prev_waiting=prev_waiting,
        waiting=waiting,
        sm_low=sm_low,
        sm_util_pct=sm,
        sm_low_pct=sm_low_pct,
    )


def compute_saturated(s: StageFacts) -> facts.GpuUtilFact | None:
    high = s.params.compute_util_pct
    if s.util is None or s.util < high or not s.flat:
        return None
    return facts.GpuUtilFact("compute_saturated", s.util, high)


def throughput_stuck(s: StageFacts) -> facts.GpuUtilFact | None:
    low = s.params.low_util_pct
    if not _fired(s.verdict, "throughput_flattening") or s.util is None or s.util >= low:
        return None
    return facts.GpuUtilFact("throughput_stuck", s.util, low)


def empty_queue(s: StageFacts) -> facts.ServerQueueFact | None:
    if not (s.flat or s.departed) or s.waiting is None:
        return None
    if s.waiting >= s.params.queue_waiting_min:
        return None
    return facts.ServerQueueFact("empty_queue", s.waiting, s.params.queue_waiting_min)


def closed_loop_wait(s: StageFacts) -> facts.ClosedLoopWaitFact | None:
    if not (s.flat or s.departed):
        return None
    known: tuple[tuple[facts.MissingData, float | None], ...] = (
        ("gpu_util", s.util),
        ("server_queue", s.waiting),
    )
    return facts.ClosedLoopWaitFact(tuple(name for name, value in known if value is None))


def memory_leading(s: StageFacts) -> facts.MemoryLeadingFact | None:
    if not _fired(s.verdict, "memory_pressure"):
        return None
    return facts.MemoryLeadingFact(s.memory, s.mem)


def interference(s: StageFacts) -> facts.InterferenceFact | None:
    if not s.baseline.interference_suspected:
        return None
    return facts.InterferenceFact()
