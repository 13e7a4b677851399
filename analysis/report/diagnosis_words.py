"""The diagnosis in words: every bottleneck rule's reading, a stage's failures and the warnings
on how much the numbers rest on, written from their facts.

The diagnosis (:mod:`analysis.diagnosis`) returns records (:mod:`analysis.diagnosis.facts`, the
:class:`~analysis.diagnosis.facts.FailureMix`); this module is the one place that turns
them into the words the screen, ``--explain``, record.md, report.html and knee.json show, with
the number formats of :mod:`loadknee_core.numeric`, so a rewording is one change here and one
reviewed diff of the golden files.
"""

from __future__ import annotations

from analysis import rules
from analysis.diagnosis.facts import (
    AllFailedFact,
    ClientBoundFact,
    ClosedLoopWaitFact,
    DiagnosisFact,
    FailingFact,
    FailureKind,
    FailureMix,
    GpuIdleFact,
    GpuUtilFact,
    InterferenceFact,
    KvContentionFact,
    MemoryFullFact,
    MemoryLeadingFact,
    MissingData,
    NoRuleFact,
    PrefillFact,
    ServerQueueFact,
    SharedHostFact,
    SmallStageFact,
)
from analysis.knee.facts import LateClientFact
from analysis.report.knee_words import MEMORY_NAMES, host_load_text
from loadknee_core.contract import all_failed_words
from loadknee_core.numeric import counted, fmt, fmt_ms

#: how each decode-speed figure is named
DECODE_NAMES = {"tpot": "TPOT", "itl": "ITL"}
#: how each missing server figure is named
MISSING_NAMES: dict[MissingData, str] = {
    "gpu_util": "GPU utilisation",
    "server_queue": "server queue",
}
#: how each non-HTTP outcome is named
OUTCOME_NAMES: dict[str, str] = {
    "timeout": "timeouts",
    "connect_error": "connection errors/resets",
    "incomplete": "cut streams",
    "malformed": "malformed responses",
    "stream_error": "error objects",
    "empty_response": "empty responses",
    "client_error": "client errors",
}
#: the reason of a stage no rule explains
NO_RULE = "no bottleneck rule matched"
#: what each rule concludes, after its figures
QUEUEING = (
    "queueing / KV-cache contention; requests wait for a running slot, which is what "
    "lengthens TTFT and the tail; tune --max-num-seqs (--parallel on llama.cpp) "
    "rather than add GPUs"
)


def kind_name(kind: FailureKind) -> str:
    """``HTTP 503``, ``HTTP errors`` (no status), ``timeouts``, ``cut streams``, ..."""
    if kind.outcome == "http_error":
        return "HTTP errors" if kind.http_status is None else f"HTTP {kind.http_status}"
    return OUTCOME_NAMES.get(kind.outcome, kind.outcome)


def _share(pct: float) -> str:
    return f"{pct:.0f} %" if pct >= 1 else f"{pct:.1g} %"


def mix_text(mix: FailureMix) -> str:
    """``22 % HTTP 503 (150); 3 % timeouts (20); top messages: "queue full" ×150``."""
    named = sorted(((kind_name(k), n) for k, n in mix.kinds), key=lambda kv: (-kv[1], kv[0]))
    text = "; ".join(f"{_share(mix.pct(n))} {name} ({n})" for name, n in named)
    if mix.messages:
        top = ", ".join(f'"{msg}" ×{n}' for msg, n in mix.messages)
        text += f"; top messages: {top}"
    return text


def failures_text(failures: FailureMix | str) -> str:
    """A stage's failures in words ("" for none; a str is words read back from knee.json)."""
    return failures if isinstance(failures, str) else mix_text(failures)


def _failing(fact: FailingFact) -> str:
    share, mix, cite = fmt(fact.share_pct, " %"), mix_text(fact.mix), rules.cite(fact.rule)
    if fact.family == "overload":
        return (
            f"{share} of requests were turned away with HTTP 429/503 ({mix}): the server "
            "is overloaded (its waiting queue is full, or it is restarting); lower the "
            f"concurrency or raise the server's queue limit {cite}"
        )
    if fact.family == "stalls":
        return (
            f"{share} of requests timed out while the served ones kept an e2e P95 of "
            f"{fmt(fact.e2e_p95_ms, ' ms')} ({mix}): the server stalls some "
            f"requests (hung or starved streams), which is not queueing; check its logs {cite}"
        )
    return (
        f"{share} of requests failed in the server ({mix}): server errors, not a capacity "
        f"limit; fix them before reading the knee {cite}"
    )


def _prefill(fact: PrefillFact) -> str:
    return (
        f"TTFT P95 {fmt(fact.ttft_p95_ms, ' ms')} is {fact.ttft_ratio:.2g}× the baseline's while "
        f"the {DECODE_NAMES[fact.decode]} median {fmt(fact.decode_p50_ms, ' ms')} is only "
        f"{fact.decode_ratio:.2g}× its own: prefill of long inputs is the limit; consider "
        "chunked prefill or capping input length"
    )


def _kv_contention(fact: KvContentionFact) -> str:
    evidence = []
    if fact.waiting_grew:
        evidence.append(
            f"waiting requests grew {fmt(fact.prev_waiting)} → {fmt(fact.waiting)} on average"
        )
    if fact.sm_low:
        evidence.append(
            f"SM utilisation only {fmt(fact.sm_util_pct, ' %')} (low under {fact.sm_low_pct:g} %)"
        )
    return (
        f"the tail rose while {MEMORY_NAMES[fact.memory]} was not full "
        f"({fmt(fact.memory_pct, ' %')}); "
        + " and ".join(evidence)
        + ": queueing / KV-cache contention; tune --max-num-seqs or enable prefix caching "
        "rather than add GPUs"
    )


def _server_queue(fact: ServerQueueFact) -> str:
    if fact.kind == "empty_queue":
        return (
            f"the server's waiting queue stayed empty ({fmt(fact.waiting_mean)} on average) "
            "while throughput stopped keeping pace with users and latency rose: every "
            "request runs, but each decode step slows as the batch grows (compute-bound "
            "batching)"
        )
    return (
        f"the server's waiting queue held "
        f"{counted_figure(fact.waiting_mean, 'request')} on average (max "
        f"{fmt(fact.waiting_max)}) while {MEMORY_NAMES[fact.memory]} was at "
        f"{fmt(fact.memory_pct, ' %')}: {QUEUEING}"
    )


#: what GPU utilisation against its threshold says (``util``: its figure), by the rule that read it
GPU_UTIL_WORDS = {
    "compute_saturated": "GPU utilisation averaged {util} (high at {f.threshold_pct:g} %) while "
    "throughput stopped growing: compute is saturated, more concurrency only queues",
    "throughput_stuck": "throughput stopped growing while the GPU was busy only {util} of the "
    "time (low under {f.threshold_pct:g} %): the limit is scheduling, the network or the "
    "client's ability to drive the concurrency, not the model; check that the load generator "
    "keeps up",
}


def _gpu_util(fact: GpuUtilFact) -> str:
    return GPU_UTIL_WORDS[fact.kind].format(f=fact, util=fmt(fact.gpu_util_pct, " %"))


def _closed_loop(fact: ClosedLoopWaitFact) -> str:
    missing = " or ".join(MISSING_NAMES[m] for m in fact.missing)
    why = f" (no {missing} data to tell compute from KV contention)" if missing else ""
    return (
        "throughput stopped keeping pace with users while latency rose: requests wait for "
        f"a slot{why}"
    )


def diagnosis_words(fact: DiagnosisFact) -> str:
    """What one bottleneck rule saw, in words."""
    match fact:
        case ClientBoundFact():
            return (
                f"load-generator CPU peaked at {fmt(fact.client_cpu_peak_pct, ' %')} of a core: "
                "the client, not the server, may be the limit; use more Locust workers before "
                "trusting this stage"
            )
        case MemoryFullFact():
            return (
                f"{MEMORY_NAMES[fact.memory]} peaked at {fmt(fact.memory_pct, ' %')} (full at "
                f"{fact.full_pct:g} %), {fmt(fact.preemptions)} preemptions, GPU idle in "
                f"{fmt(fact.gpu_idle_pct, ' %')} of samples: memory is the limit "
                "(swapping / recomputation, OOM next); lower --gpu-memory-utilization or "
                "--max-model-len, or cap --max-num-seqs"
            )
        case FailingFact():
            return _failing(fact)
        case GpuIdleFact():
            return (
                f"GPU utilisation was at or near 0 in {fmt(fact.gpu_idle_pct, ' %')} of samples "
                f"while requests were in flight (limit {fact.threshold_pct:g} %): waiting on the "
                "host side (CPU pre-processing, log flushing, network); more concurrency only "
                "lengthens the queue"
            )
        case ServerQueueFact():
            return _server_queue(fact)
        case PrefillFact():
            return _prefill(fact)
        case KvContentionFact():
            return _kv_contention(fact)
        case GpuUtilFact():
            return _gpu_util(fact)
        case ClosedLoopWaitFact():
            return _closed_loop(fact)
        case MemoryLeadingFact():
            return (
                f"{MEMORY_NAMES[fact.memory]} peaked at {fmt(fact.memory_pct, ' %')} while "
                "latency and throughput still held: memory is the leading indicator (it fills "
                "before latency collapses); the next stage risks OOM"
            )
        case InterferenceFact():
            return (
                "the baseline's P95 was far above its median: something outside the test "
                "(another process on the GPU, network jitter, logging) interferes"
            )
        case NoRuleFact():
            return NO_RULE


def counted_figure(value: float, noun: str) -> str:
    """A measured figure and its noun, plural unless exactly one: "1 request", "1.6 requests"."""
    return f"{fmt(value)} {noun}" if value == 1 else f"{fmt(value)} {noun}s"


def bottleneck_text(reason: DiagnosisFact | str) -> str:
    """A stage's bottleneck reason in words ("" when not diagnosed; a str is words read back)."""
    return reason if isinstance(reason, str) else diagnosis_words(reason)


def small_stage_text(fact: SmallStageFact) -> str:
    """The warning on a stage too small to trust."""
    return (
        f"{counted(fact.users, 'user')}: only {counted(fact.requests, 'request')} over "
        f"{fact.window_s:.1f} s measured (fewer than {fact.min_requests} or under "
        f"{fact.min_seconds:g} s): too small to trust its percentiles; hold the stage "
        f"longer {rules.cite(fact.rule)}"
    )


def late_client_text(fact: LateClientFact) -> str:
    """The warning on a stage whose load generator was late against its latency."""
    return (
        f"the load generator was late by up to {fmt_ms(fact.lag_max_ms)} at "
        f"{counted(fact.users, 'user')}{host_load_text(fact)}: its latencies and throughput "
        "there read the client, not the server; run on a quieter machine or with more "
        "--processes "
        f"{rules.cite(fact.rule)}"
    )


def shared_host_text(fact: SharedHostFact) -> str:
    """The warning on a server that shared an overloaded machine with the load generator."""
    return (
        f"the server shares this machine ({fact.server_host}) and the machine was overloaded "
        f"at {counted(fact.users, 'user')}: load {fact.host_load_1m:.1f} on "
        f"{counted(fact.host_cpus, 'core')} ({fact.limit_per_cpu:g} or more per core); the "
        "server's figures include the CPU it waited for: run the load generator on another "
        f"machine, or stop what else runs here {rules.cite(fact.rule)}"
    )


def all_failed_text(fact: AllFailedFact) -> str:
    """The warning on a run whose every request failed, its top causes counted."""
    return f"{all_failed_words(fact.requests, fact.causes)} {rules.cite(fact.rule)}"
