"""What the advice judged, as typed records: the deploy answer, the settings and each reason.

Each record has a ``kind`` from a closed vocabulary (or is its own kind), the figures with their
units in their names, the threshold or margin they were held against and, where a rule of
docs/method.md stands behind it, the rule's key (:data:`analysis.rules.RULES`). No words and no
formatted number: :mod:`analysis.report.advice_words` writes them, once, for the screen,
``--explain``, record.md, report.html, the YAML comments and knee.json alike. Tests of the
advice assert on these records; the golden file of advice words pins what each one says.

A reason may also be a ``str``: words already written (read back from knee.json, or set by a
step that words its own reason, such as the SLO advice).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from analysis.model import Reason, Signal
    from analysis.slo.facts import CapacityDoubt
    from analysis.stages.run_cut import RunCut
    from loadknee_core.slo_targets import SloParams


@dataclass(frozen=True)
class KneeWhyFact:
    """Why the knee stage is the knee: which queue showed (the server's gauge, the client-side
    queue, or none) and whether the curve flattened while the tail departed as well."""

    queue: Literal["server", "client", "none"]
    curve: bool  # throughput flattening and tail departure both fired


if TYPE_CHECKING:
    #: what a limit-breaking stage showed: the signal that broke it (SLA, memory, errors), the
    #: knee's queue and curve, the stage's first reason, or nothing said
    DeployWhy: TypeAlias = Signal | KneeWhyFact | Reason | None


@dataclass(frozen=True)
class DeployFact:
    """The deploy answer (:mod:`analysis.advice.deploy`).

    Kinds: ``no_stage`` (nothing measured), ``none_safe`` (the first trusted stage breaks a
    limit), ``configure`` (the stage before the first limit-breaking stage), ``no_hard_knee``
    (the stage before the first departed tail), ``no_hard_knee_low`` (the first stage's tail
    already departed), ``tested_range`` (no limit broken up to ``top_users``); with SLOs
    (:mod:`analysis.slo.advice`): ``slo_none`` (no tested stage meets ``slo_limits``),
    ``slo_bound`` (the SLO capacity, below the knee's answer ``batch_users``).
    """

    kind: Literal[
        "no_stage",
        "none_safe",
        "configure",
        "no_hard_knee",
        "no_hard_knee_low",
        "tested_range",
        "slo_none",
        "slo_bound",
    ]
    users: int | None = None  # the concurrency to configure
    at_users: int | None = None  # the stage that broke the limits
    bounds: tuple[DeployBound, ...] = ()  # the limits it broke, in BOUND order
    why: DeployWhy = None
    cap_users: int | None = None  # max_concurrency, when it bounds the answer below the stage
    server_slots: float | None = None  # the most the server ran at once, when at or below it
    departed_users: int | None = None  # the first stage whose tail departed
    departed_tail: Signal | None = None  # its tail signal
    batch_users: int | None = None  # offline batch's figure (soft knee: the stage before it)
    tail_note: Signal | None = None  # the answer's own stage's tail, already departed
    top_users: int | None = None  # the highest judged stage
    slo_limits: SloParams | None = None  # the SLO targets (analysis.slo.evaluate.SloResult)
    rule: str = "deploy"


@dataclass(frozen=True)
class MaxConcurrencyFact:
    """``max_concurrency``: the stage before the knee, before the red line, or the top."""

    kind: Literal["before_knee", "before_red_line", "untested_limit"]
    limit_users: int | None = None  # the knee's or the red line's users
    rule: str = "max_concurrency"


@dataclass(frozen=True)
class BaseCapacityFact:
    """``base_capacity``: a stage met the terms (100 % success, memory at or under the pressure
    threshold, the tail within the SLA) or none did."""

    found: bool
    memory_pressure_pct: float
    rule: str = "base_capacity"


@dataclass(frozen=True)
class WatermarkFact:
    """``production_watermark`` (``low``–``high`` share of the base capacity) and the
    ``interactive_max_concurrency`` that keeps its margin (``kind`` says which)."""

    kind: Literal["watermark", "interactive"]
    low_ratio: float
    high_ratio: float
    base_users: int
    rule: str = "watermark"


@dataclass(frozen=True)
class OfflineFact:
    """``offline_batch_max_concurrency``: at the knee when its stage was clean, else
    max_concurrency (the knee stage failed or neared OOM, or no knee was measured)."""

    kind: Literal["at_knee", "knee_unclean", "no_knee"]
    knee_users: int | None = None


@dataclass(frozen=True)
class QueueTimeoutFact:
    """``queue_timeout_ms``: the baseline's e2e percentile × the margin, rounded up."""

    percentile: Literal["P95", "P99", "median"]
    baseline_ms: float
    margin: float
    rule: str = "queue_timeout"


@dataclass(frozen=True)
class RequestTimeoutFact:
    """``request_timeout_ms``: the longest output's time at ``users``, × the margin.

    ``tpot``: TTFT P95 + tokens × TPOT P95; ``per_token``: tokens × the median ms per token ×
    the stage's P99/P50."""

    method: Literal["tpot", "per_token"]
    users: int
    tokens: float
    output_ms: float  # the longest output's time, before the margin
    margin: float
    ttft_p95_ms: float = 0.0
    tpot_p95_ms: float | None = None
    ms_per_token: float | None = None
    tail_ratio: float | None = None  # P99 / P50
    rule: str = "request_timeout"


@dataclass(frozen=True)
class CapFact:
    """The engine's concurrency cap: max_concurrency × batch size, the stage before the knee
    (``limit``: knee) or the red line."""

    max_concurrency: int
    limit: Literal["knee", "red_line"]
    limit_users: int | None
    batch_size: int
    rule: str = "max_num_seqs"


@dataclass(frozen=True)
class OwnLimitFact:
    """The knee is the server's own concurrency limit: it ran ``slots`` at once while requests
    waited, the KV cache well below pressure; raise ``flag`` to what the headroom predicts:
    from the engine's KV pool where it stated one (``pool_tokens`` over ``request_tokens``, the
    run's longest request: the same for every run of the server), else from the KV gauge's
    peak (``slots`` × pressure / peak: it moves with when the samples fell)."""

    flag: str
    slots: int
    kv_peak_pct: float
    predicted: int
    memory_pressure_pct: float
    rule: str = "max_num_seqs"
    pool_tokens: int | None = None  # the engine's KV pool (vllm:cache_config_info)
    request_tokens: float | None = None  # prompt + completion of the run's longest request
    #: a soft knee's deploy answer (nothing queued at the knee, the tail departed below it): the
    #: interactive figure the tail set, which more slots do not move, and the offline batch's,
    #: which they raise (None: the deploy figure is the knee's own)
    interactive_users: int | None = None
    offline_users: int | None = None


@dataclass(frozen=True)
class GpuMemoryFact:
    """``vllm.gpu_memory_utilization``: memory led the failure; lower it by a step."""

    current: float
    assumed: bool  # vLLM's default, the run did not say
    lower: float
    rule: str = "gpu_memory_utilization"


@dataclass(frozen=True)
class ModelLenFact:
    """``vllm.max_model_len``: the replayed log's longest context × headroom, a power of two."""

    longest_tokens: float
    records: float
    headroom: float
    rule: str = "max_model_len"


@dataclass(frozen=True)
class ReplicasFact:
    """``replicas``: the target / (users per replica at the watermark × efficiency)."""

    target: int
    per_replica: int
    efficiency: float
    measured: bool  # the efficiency was given, not assumed linear


@dataclass(frozen=True)
class SloAdviceFact:
    """A setting the SLOs decide (:mod:`analysis.slo.advice`).

    Kinds: ``slo_capacity`` (the highest concurrency meeting every SLO in ``slo_limits``, with the
    SLO step's ``doubt``; ``capacity`` None: none met them), ``binding`` (which binds first:
    ``binding`` latency / throughput / none, from ``capacity`` against ``max_concurrency``),
    ``interactive`` (the SLO capacity caps interactive traffic), ``replicas`` (``target`` /
    (``per_replica`` from the SLO capacity or the watermark × ``efficiency``))."""

    kind: Literal["slo_capacity", "binding", "interactive", "replicas"]
    slo_limits: SloParams | None = None  # the SLO targets (analysis.slo.evaluate.SloResult)
    capacity: int | None = None
    doubt: CapacityDoubt | None = None  # the SLO step's doubt about the capacity (None: none)
    binding: str = ""
    max_concurrency: int | None = None
    target: int | None = None
    per_replica: int | None = None
    from_slo: bool = False  # per_replica is the SLO capacity (else the watermark)
    efficiency: float | None = None
    rule: str = "slo_capacity"


@dataclass(frozen=True)
class WithheldFact:
    """A setting not given, with what to do instead.

    Kinds: ``not_saturated`` (no knee or red line up to ``top_users``: sweep ``host`` again at
    ``levels``), ``unknown_engine`` (no /metrics to name the engine: ``slots`` when the server
    showed its own limit, else the ``cap``), ``already_at_cap`` (the server already runs
    ``flag`` ``cap``), ``small_log`` (``records`` under ``min_records``: max-model-len),
    ``refuses`` (the server turns requests away above ``cap``: its own admission limit)."""

    kind: Literal["not_saturated", "unknown_engine", "already_at_cap", "small_log", "refuses"]
    top_users: int | None = None
    host: str = ""
    levels: tuple[int, ...] = ()
    slots: int | None = None
    cap: int | None = None
    flag: str = ""
    records: float | None = None  # None: the log's size is unknown
    min_records: int | None = None
    longest_tokens: float | None = None
    rule: str = "max_num_seqs"


#: what a recommendation's reason records (a ``str``: words already written)
AdviceFact: TypeAlias = (
    MaxConcurrencyFact
    | BaseCapacityFact
    | WatermarkFact
    | OfflineFact
    | QueueTimeoutFact
    | RequestTimeoutFact
    | CapFact
    | OwnLimitFact
    | GpuMemoryFact
    | ModelLenFact
    | ReplicasFact
    | DeployFact
    | SloAdviceFact
)


DeployBound = Literal["knee", "sla", "memory", "refusals", "errors", "tail", "tested_range", "none"]


@dataclass(frozen=True)
class DeployAnswer:
    """The one concurrency to configure and the limit that bound it
    (:mod:`analysis.advice.deploy`)."""

    users: int | None  # None: no tested stage was safe
    bound: DeployBound
    #: what bound it, as judged (its words: analysis.report.advice_words.deploy_text); a str is
    #: words already written (knee.json read back, the SLO step)
    fact: DeployFact | str


@dataclass(frozen=True)
class Recommendation:
    key: str  # e.g. max_concurrency, queue_timeout_ms, vllm.max_num_seqs
    value: Any
    #: why this value, as judged (its words: analysis.report.advice_words.reason_text); a str
    #: is words already written (knee.json read back, the SLO step)
    reason: AdviceFact | str


@dataclass(frozen=True)
class Recommendations:
    items: tuple[Recommendation, ...]
    server_flags: tuple[str, ...]  # e.g. ("--max-num-seqs 24", "--gpu-memory-utilization 0.85")
    #: settings not given, each with why and what to do instead (words: advice_words)
    withheld: tuple[WithheldFact | str, ...] = ()
    deploy: DeployAnswer | None = None  # the one answer, printed first
    #: why these settings cannot be trusted yet: the run's cut ("" when final; a str: words read
    #: back from knee.json); its words: analysis.report.stage_words.provisional_text
    provisional: RunCut | str = ""
    #: the answer's standing is "cannot tell" (analysis.advice.standing): nothing is recommended
    #: and no capacity stands, the stages' point figure included (it is the noise's pick)
    cannot_tell: bool = False

    def get(self, key: str) -> Any:
        for item in self.items:
            if item.key == key:
                return item.value
        return None
