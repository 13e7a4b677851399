"""What each knee signal measured, as typed records: no words, no formatted number.

A signal (:class:`analysis.model.Signal`) says whether its rule fired; its ``fact`` says what the
rule saw: a ``kind`` from a closed vocabulary, the figures with their units in their names, the
threshold held against and the rule's key (:data:`analysis.rules.RULES`). The words are written
from these once, by :mod:`analysis.report.knee_words`, for the screen, ``--explain``, the report
and knee.json alike; tests of the judgement assert on these records, not on sentences.

Fields follow the house rule for numbers: ``None`` where a figure could not be measured.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal, get_args, get_type_hints

#: whose single-user tail the stages' tails are compared with: the sequential baseline's, or a
#: 1-user level's that measured as many requests and found a lower tail (interference only adds)
TailSource = Literal["baseline", "one_user_level"]
#: which memory figure a memory signal read (``gpu_preallocated``: GPU memory flat across stages
#: that doubled their users, so no figure: a pre-allocated pool says nothing)
MemorySource = Literal["kv_cache", "gpu", "gpu_preallocated"]
#: the tail metric: e2e latency (ms), each request's slowdown (its e2e over its single-user time
#: at its lengths: ×), or seconds per 1k prompt+completion tokens (s)
TailMetric = Literal["e2e", "slowdown", "s_per_1k"]
#: per tail metric, its record-table column (and :class:`~analysis.model.Baseline` field) for a
#: percentile ("p95", "p99")
TAIL_COLUMNS: dict[str, str] = {
    "e2e": "e2e_{}_ms",
    "slowdown": "slowdown_{}",
    "s_per_1k": "s_per_1k_total_{}",
}


def tail_metric(metric: str) -> TailMetric:
    """The metric a knee parameter names (``"auto"`` unresolved reads as e2e)."""
    return "slowdown" if metric == "slowdown" else "s_per_1k" if metric == "s_per_1k" else "e2e"


def tail_column(metric: str, percentile: str) -> str:
    """The record table's column of ``metric``'s tail at ``percentile``."""
    return TAIL_COLUMNS[tail_metric(metric)].format(percentile)


#: which memory threshold: the early sign or the OOM risk (each also its signal's name)
MemoryKind = Literal["memory_pressure", "oom_risk"]
#: which gain rule: throughput flattening or gain narrowing
GainKind = Literal["flattening", "narrowing"]


@dataclass(frozen=True)
class GainFact:
    """Throughput flattening or gain narrowing: what each added user brought, as a share of one
    user's rate alone (``gain_ratio``). No earlier served stage: the figures are ``None``."""

    kind: GainKind  # which rule (its key in analysis.rules)
    column: str  # the throughput column: output_tok_s | total_tok_s | qps
    threshold_ratio: float  # fires below this gain (flat_gain_ratio or narrowing_gain_ratio)
    prev_users: float | None = None
    users: float | None = None
    prev_rate: float | None = None  # the column's figure at prev_users
    rate: float | None = None
    single_user_rate: float | None = None
    added_per_user: float | None = None  # (rate - prev_rate) / (users - prev_users)
    gain_ratio: float | None = None  # added_per_user / single_user_rate
    gain_upper_ratio: float | None = None  # its upper bound within both stages' intervals
    #: the same gain read by Little's law from a closed loop's users over their median e2e
    #: (no think time, fixed lengths), and its upper bound within both medians' intervals
    #: (:mod:`analysis.stages.median_interval`): a second measurement that needs no time windows
    latency_gain_ratio: float | None = None
    latency_gain_upper_ratio: float | None = None

    @property
    def below(self) -> bool:
        return self.gain_ratio is not None and self.gain_ratio < self.threshold_ratio


@dataclass(frozen=True)
class PlateauFact:
    """The stage lies past the breakpoint of the fit over all stages (:mod:`analysis.knee.fit`):
    flat by the fit, whatever its own step says."""

    kind: Literal["on_plateau"]
    users: float
    capacity_users: float
    capacity_low_users: float
    capacity_high_users: float
    plateau_ratio: float  # throughput per added user past the breakpoint, × one user's rate
    rule: str = "knee_fit"


@dataclass(frozen=True)
class TailFact:
    """The stage's tail over the single-user one (tail departure)."""

    kind: Literal["tail"]
    percentile: str  # p95 | p99
    metric: TailMetric
    tail: float | None  # ms for e2e, × for slowdown, s for s_per_1k
    base_tail: float | None  # the yardstick, same unit
    source: TailSource
    ratio: float | None  # tail / base_tail
    lower_ratio: float | None  # the ratio's lower bound within the e2e interval (noise-aware)
    threshold_ratio: float
    outcome: Literal["departed", "undecided", "held"]  # undecided: the interval spans the limit
    rule: str = "tail"
    #: the ratio's upper bound: the stage's tail at its interval's high end (its point figure
    #: without one) over the yardstick at its low end (None without the yardstick's low end)
    upper_ratio: float | None = None
    #: the stage's e2e median at its interval's low end over the yardstick (e2e only): past the
    #: limit, even the typical request is, whatever the tail's own interval
    median_lower_ratio: float | None = None


@dataclass(frozen=True)
class SlaFact:
    kind: Literal["sla"]
    percentile: str
    tail_ms: float | None
    threshold_ms: float
    rule: str = "sla"


@dataclass(frozen=True)
class MemoryFact:
    """Peak memory against the pressure or the OOM-risk threshold."""

    kind: MemoryKind
    source: MemorySource
    peak_pct: float | None
    threshold_pct: float
    rule: str = "memory"


@dataclass(frozen=True)
class OomFact:
    """GPU memory at the OOM threshold while requests failed (``oom``), or falling to under half
    of the previous stage's peak while they failed (``oom_crash``: the process died)."""

    kind: Literal["oom", "oom_crash"]
    gpu_peak_pct: float | None
    failed: int
    threshold_pct: float
    gpu_before_pct: float | None = None  # the previous stage's peak (oom_crash)
    rule: str = "oom"


@dataclass(frozen=True)
class ErrorsFact:
    """Failed requests: any (``errors``), or their share against the red line (``error_rate``)."""

    kind: Literal["errors", "error_rate"]
    success_pct: float | None
    failed: int
    served: int  # ok + failed
    threshold_pct: float
    rule: str = "errors"


@dataclass(frozen=True)
class RefusalsFact:
    """Requests the server turned away at once (its own admission limit), of those sent: a
    stage past the capacity at any share (:mod:`analysis.knee.refusal_signal`)."""

    kind: Literal["refusals"]
    refused: int
    served: int  # ok + failed
    error_pct: float | None
    rule: str = "errors"


@dataclass(frozen=True)
class ClientCpuFact:
    kind: Literal["client_cpu"]
    cpu_peak_pct: float | None  # of one core
    threshold_pct: float
    rule: str = "client"


@dataclass(frozen=True)
class AbsentFact:
    """A signal that had nothing to read: the server reports no queue, no client-side queue
    estimate (no TTFT), no in-flight estimate, no interval computed (no raw rows)."""

    kind: Literal["no_server_queue", "no_client_queue", "no_in_flight", "no_interval"]


@dataclass(frozen=True)
class ServerQueueFact:
    """The server's own running and waiting counts (server saturation, or free slots)."""

    kind: Literal["server_saturated", "server_free_slots"]
    running_mean: float
    slots: float  # the highest running count the server reported in any stage
    waiting_mean: float
    in_flight: float  # users × batch
    threshold_waiting: float
    running_peak: float | None = None  # server_saturated: the stage's highest running sample
    running_share: float | None = None  # server_saturated: share of the slots to be reached
    # server_saturated with fewer in flight than its most: the KV cache's peak % that made
    # fewer fit, and the memory-pressure threshold it reached (None otherwise)
    kv_peak_pct: float | None = None
    kv_pressure_pct: float | None = None
    overrules_client: bool = False  # free slots that demoted a knee judged on a noisy figure
    rule: str = "saturation"


@dataclass(frozen=True)
class NoiseFact:
    """The stage's throughput interval (``interval``), or a window too short for one."""

    kind: Literal["interval", "window_too_short"]
    max_pct: float  # untrusted above this half-width (% of the figure)
    target_pct: float  # the half-width a longer stage would reach
    window_needed_s: float | None  # measured window that would reach target_pct
    width_pct: float | None = None  # the interval's half-width, % of output tok/s
    windows: float | None = None  # time windows behind the interval
    window_s: float | None = None  # window_too_short: the measured window
    rule: str = "noisy"

    @property
    def too_wide(self) -> bool:
        return self.width_pct is not None and self.width_pct > self.max_pct


@dataclass(frozen=True)
class ClientQueueFact:
    """Queueing seen from the client (:mod:`analysis.stages.client_queue`)."""

    kind: Literal["client_saturated"]
    running: float  # requests in service on average, client-estimated
    running_low: float | None
    running_high: float | None
    slots: float  # the most any stage ran, client-estimated
    waiting: float
    waiting_low: float | None
    in_flight: float  # users × batch
    late_share_pct: float | None  # requests that came a quarter service time late or more
    late_wait_ms: float | None
    threshold_waiting: float  # the waiting needed (doubled without a group of late requests)
    # where the count running fell short of the most but the KV held reached it (a length mix
    # under a KV budget: analysis.stages.kv_grants): that KV, % of the most the run held
    kv_fill_pct: float | None = None
    rule: str = "client_queue"


@dataclass(frozen=True)
class ClientUnqueuedFact:
    """A knee on a noisy client figure where the client's queue estimate saw nothing wait."""

    kind: Literal["client_unqueued"]
    waiting: float
    threshold_waiting: float
    rule: str = "client_queue"


@dataclass(frozen=True)
class InFlightFact:
    """Stage validity: the requests the client kept in flight against its users."""

    kind: Literal["in_flight", "in_flight_after_errors"]
    in_flight: float
    users: float  # users × batch
    share: float  # in_flight / users
    threshold_share: float
    rule: str = "stage_validity"


@dataclass(frozen=True)
class LateClientFact:
    """A stage whose load generator ran late against the latency it measured
    (:mod:`analysis.knee.late_client`): its mean event-loop lag at or over ``limit_ms``, or over
    ``share_pct`` of the stage's e2e P50 (and at least ``floor_ms``); the stage is untrusted and
    cannot be the knee. ``host_load_1m``/``host_cpus``: the client host's load where it was
    highest per CPU. ``kind`` ``client_lag``: measured, within the rule (not late)."""

    kind: Literal["client_late", "client_lag"]
    users: int
    lag_mean_ms: float
    lag_p95_ms: float
    lag_max_ms: float
    e2e_p50_ms: float | None
    host_load_1m: float | None
    host_cpus: int | None
    limit_ms: float
    share_pct: float
    floor_ms: float
    rule: str = "late_client"

    @property
    def late(self) -> bool:
        return self.kind == "client_late"


@dataclass(frozen=True)
class ResumedFact:
    """A later stage out-served this "knee" stage: a dip."""

    kind: Literal["throughput_resumed"]
    column: str
    later_users: int
    later_rate: float
    rate: float
    threshold_pct: float  # resume_gain_pct
    rule: str = "dip"


@dataclass(frozen=True)
class QueuePassedFact:
    """The client saw requests wait at this "knee" stage (the server exports no gauges), yet a
    later stage that kept at least as many requests in flight saw none wait: a passing slowdown
    (a starved server process, a stall), not the limit: a queue does not empty as users are
    added."""

    kind: Literal["queue_passed"]
    waiting: float  # requests waiting on average here, by the client's estimate
    in_flight: float
    later_users: int
    later_waiting: float
    later_in_flight: float
    rule: str = "dip"


@dataclass(frozen=True)
class GaugeCheckFact:
    """The client's running estimate against the server's gauge, and their two saturation
    verdicts, where they disagree."""

    kind: Literal["gauges_disagree"]
    estimate: float
    gauge: float
    running_off: bool  # more than the allowed share apart
    server_saturated: bool | None  # the server's verdict where the two verdicts differ, else None
    rule: str = "client_queue"


@dataclass(frozen=True)
class NoSignalFact:
    """A comfortable stage's one reason: no rule fired."""

    kind: Literal["no_signal"] = "no_signal"


@dataclass(frozen=True)
class ClientBoundFact:
    """A client-bound stage's caveat: the client's CPU signal (``client``, an
    :class:`analysis.model.Signal`) fired, so the stage is untrusted and cannot be the knee."""

    client: Any
    kind: Literal["client_bound"] = "client_bound"
    rule: str = "client"


@dataclass(frozen=True)
class KneeSummaryFact:
    """What the knee's one-paragraph summary says: where the knee and the red line are (with the
    first two reasons of each stage), the answer, what bounds it, the fit, and which stages were
    untrusted or not judged. Users are whole concurrencies; empty tuples say "none"."""

    stages: int  # level stages judged or not
    top_users: int | None  # the highest level tested
    lacking_users: tuple[int, ...]  # stages with insufficient data
    #: when no stage could be judged: the first one's reason (a RowsFact or FaultReason, or None)
    first_lacking: Any
    knee: Any  # the knee's StageVerdict, or None
    red_line: Any  # the red line's StageVerdict, or None
    max_concurrency: int | None
    server_slots: int | None  # the server ran this many at once while requests waited
    client_slots: int | None  # the same seen from the client (no server gauges)
    server_reports_queue: bool  # False: judged from the client side alone
    fit_flat: bool | None  # None: no fit over all stages; False: no plateau
    capacity: tuple[float, float, float] | None  # the fit's low, high and breakpoint (users)
    untrusted_users: tuple[int, ...]  # client-bound stages
    noisy_users: tuple[int, ...]  # too noisy or short to judge
    tail_source: TailSource
    tail_percentile: str
    #: stages left out because their rows disagree with stages.csv (analysis.stages.coverage)
    missing_rows_users: tuple[int, ...] = ()


@dataclass(frozen=True)
class ConfidenceFact:
    """How often the answer held when the stages' time windows were resampled
    (:mod:`analysis.knee.confidence`); ``same_pct`` None: no stage had per-window data."""

    max_concurrency: int | None
    knee_found: bool  # the answer is the stage before a knee (else the tested range's top)
    same_pct: float | None  # resamples giving the same max_concurrency, %
    resamples: int
    others: tuple[tuple[int | None, float], ...]  # the other answers and their share, %
    confident_pct: float  # at or above: confident
    unsure_pct: float  # below: unsure
    rule: str = "noisy"
    # the stages that set the answer (its own and the first past it) with no per-window data:
    # they kept their figures in every resample, so the share measures none of their noise
    unresampled: tuple[int, ...] = ()

    @property
    def measured(self) -> bool:
        """Whether the share says how sure the answer is: some stage was resampled, and none
        of the stages that set the answer kept its figures in every resample."""
        return self.same_pct is not None and not self.unresampled


SignalFact = (
    GainFact
    | PlateauFact
    | TailFact
    | SlaFact
    | MemoryFact
    | OomFact
    | ErrorsFact
    | RefusalsFact
    | ClientCpuFact
    | AbsentFact
    | ServerQueueFact
    | NoiseFact
    | ClientQueueFact
    | ClientUnqueuedFact
    | InFlightFact
    | LateClientFact
    | ResumedFact
    | QueuePassedFact
)

_BY_KIND: dict[str, type[Any]] = {}
# every signal's record, and the gauge check (a knee's caveat, not a signal's)
for _cls in (*get_args(SignalFact), GaugeCheckFact):
    for _kind in get_args(get_type_hints(_cls)["kind"]):
        _BY_KIND[_kind] = _cls


def fact_from_dict(data: dict[str, Any]) -> Any:
    """A fact rebuilt from its knee.json object (the ``kind`` picks the record)."""
    cls = _BY_KIND[data["kind"]]
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})
