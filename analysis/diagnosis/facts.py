"""What each bottleneck rule saw, as typed records: no words, no formatted number.

A rule of :mod:`analysis.diagnosis.rules` that matches a stage returns one of these: its
``kind`` is the rule's name in the table (:data:`analysis.diagnosis.bottleneck.RULES`), its
fields the figures it read (units in their names; ``None`` where a figure was not measured) and
the threshold it held them against. The words are written once, by
:mod:`analysis.report.diagnosis_words`, for the screen, ``--explain``, the report and knee.json
alike; tests of the diagnosis assert on these records, not on sentences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

#: the three families of failures the diagnosis tells apart
FailureFamily = Literal["overload", "stalls", "server_errors"]


@dataclass(frozen=True, order=True)
class FailureKind:
    """One kind of failure: the recorded ``outcome`` (``http_error``, ``timeout``,
    ``connect_error``, ...) and, for an HTTP error, its status (None: not recorded)."""

    outcome: str
    http_status: int | None = None


@dataclass(frozen=True)
class FailureMix:
    """One stage's failures: ``kinds`` and ``messages`` with their counts, most first."""

    requests: int  # measured rows of the stage, every outcome
    kinds: tuple[tuple[FailureKind, int], ...]
    messages: tuple[tuple[str, int], ...]
    overload: int  # HTTP 429 / 503
    stalls: int  # timeouts
    server_errors: int  # other HTTP errors, resets, cut streams, malformed, error objects

    @property
    def failed(self) -> int:
        return self.overload + self.stalls + self.server_errors

    def pct(self, count: int) -> float:
        return 100.0 * count / self.requests if self.requests else 0.0

    def count(self, family: FailureFamily) -> int:
        """The failures of one family."""
        return {"overload": self.overload, "stalls": self.stalls}.get(family, self.server_errors)

    @property
    def family(self) -> FailureFamily:
        """The largest family (the first of overload, stalls, server errors on a tie)."""
        families: tuple[FailureFamily, ...] = ("overload", "stalls", "server_errors")
        return max(families, key=self.count)


#: which memory figure the knee judged the stage by: the KV-cache, GPU memory, or none at all
MemorySeen = Literal["unknown", "kv_cache", "gpu"]
#: the decode-speed figure a prefill reading compares: TPOT, or the chunk gaps (ITL) without it
DecodeFigure = Literal["tpot", "itl"]
#: a server figure the closed-loop reading lacked
MissingData = Literal["gpu_util", "server_queue"]


@dataclass(frozen=True)
class _MemoryReading:
    """The memory figure a memory-minded rule read first: which one the knee judged the stage
    by, and its peak (None: not measured)."""

    memory: MemorySeen
    memory_pct: float | None


@dataclass(frozen=True)
class ClientBoundFact:
    """The load generator's CPU was at its limit: the stage is not trusted."""

    client_cpu_peak_pct: float | None
    kind: Literal["client_bound"] = "client_bound"


@dataclass(frozen=True)
class MemoryFullFact(_MemoryReading):
    """Memory at or above ``full_pct``, the OOM signal, or preempted sequences."""

    full_pct: float
    preemptions: float | None
    gpu_idle_pct: float | None
    kind: Literal["memory_full"] = "memory_full"


@dataclass(frozen=True)
class FailingFact:
    """The stage's failures are what it is about; ``family`` is their largest family and
    ``share_pct`` that family's share of the stage's requests."""

    family: FailureFamily
    share_pct: float
    mix: FailureMix
    e2e_p95_ms: float | None  # the served requests' tail (what a stall leaves fast)
    kind: Literal["failing"] = "failing"
    rule: str = "failing"  # its key in analysis.rules


@dataclass(frozen=True)
class GpuIdleFact:
    """The GPU sat idle in ``gpu_idle_pct`` of the samples while requests were in flight."""

    gpu_idle_pct: float
    threshold_pct: float
    kind: Literal["gpu_idle"] = "gpu_idle"


@dataclass(frozen=True)
class ServerQueueFact:
    """The server's own waiting queue against ``threshold_waiting``, the least that counts as a
    queue: it held requests behind a latency, throughput or slots sign (``server_queue``, with
    its max and the memory figure the knee judged by), or stayed under it while throughput went
    flat or the tail departed (``empty_queue``)."""

    kind: Literal["server_queue", "empty_queue"]
    waiting_mean: float
    threshold_waiting: float
    waiting_max: float | None = None
    memory: MemorySeen = "unknown"
    memory_pct: float | None = None


@dataclass(frozen=True)
class PrefillFact:
    """TTFT grew far past the baseline's while the decode speed held."""

    ttft_p95_ms: float
    ttft_ratio: float  # over the baseline's TTFT P95
    decode: DecodeFigure
    decode_p50_ms: float
    decode_ratio: float  # over the baseline stage's
    ttft_threshold_ratio: float
    decode_threshold_ratio: float
    kind: Literal["prefill"] = "prefill"


@dataclass(frozen=True)
class KvContentionFact(_MemoryReading):
    """The tail departed with memory not full, and the queue grew or SM utilisation stayed low."""

    waiting_grew: bool
    prev_waiting: float | None
    waiting: float | None
    sm_low: bool
    sm_util_pct: float | None
    sm_low_pct: float
    kind: Literal["kv_contention"] = "kv_contention"


@dataclass(frozen=True)
class GpuUtilFact:
    """Throughput stopped growing with GPU utilisation held against ``threshold_pct``: at or
    above it (``compute_saturated``), or under it (``throughput_stuck``)."""

    kind: Literal["compute_saturated", "throughput_stuck"]
    gpu_util_pct: float
    threshold_pct: float


@dataclass(frozen=True)
class ClosedLoopWaitFact:
    """Throughput flat or the tail departed and no rule above matched; ``missing``: the server
    figures that would have told compute from KV contention."""

    missing: tuple[MissingData, ...] = ()
    kind: Literal["closed_loop_wait"] = "closed_loop_wait"


@dataclass(frozen=True)
class MemoryLeadingFact(_MemoryReading):
    """Only the memory-pressure signal fired: memory fills before latency collapses."""

    kind: Literal["memory_leading"] = "memory_leading"


@dataclass(frozen=True)
class InterferenceFact:
    """The baseline's P95 was far above its median (:attr:`Baseline.interference_suspected`)."""

    kind: Literal["interference"] = "interference"


@dataclass(frozen=True)
class NoRuleFact:
    """A stage with signals that no bottleneck rule explains."""

    kind: Literal["no_match"] = "no_match"


#: what a bottleneck rule saw (:func:`analysis.diagnosis.bottleneck.diagnose_stage`)
DiagnosisFact: TypeAlias = (
    ClientBoundFact
    | MemoryFullFact
    | FailingFact
    | GpuIdleFact
    | ServerQueueFact
    | PrefillFact
    | KvContentionFact
    | GpuUtilFact
    | ClosedLoopWaitFact
    | MemoryLeadingFact
    | InterferenceFact
    | NoRuleFact
)


@dataclass(frozen=True)
class SmallStageFact:
    """A level stage with too few measured requests or seconds to trust its percentiles."""

    users: int
    requests: int
    window_s: float
    min_requests: int
    min_seconds: float
    rule: str = "small_stage"


@dataclass(frozen=True)
class SharedHostFact:
    """The server shares the load generator's machine (a loopback address) and that machine was
    overloaded: the stage where its 1-minute load per CPU was highest, at or above the limit."""

    users: int  # the stage's users (1 for the baseline)
    host_load_1m: float
    host_cpus: int
    server_host: str  # the loopback host the run targeted
    limit_per_cpu: float
    rule: str = "shared_host"


@dataclass(frozen=True)
class AllFailedFact:
    """Every judged request of the run failed; ``causes``: the top causes, counted, most first."""

    requests: int
    causes: tuple[tuple[str, int], ...]
    rule: str = "all_failed"
