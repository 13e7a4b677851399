"""Value objects passed between the analysis steps and the report writers.

The computing modules (summary, baseline, knee, diagnosis, recommend) return these; the report
modules only read them. Keeping them in one small module lets both sides be written and tested
apart. Everything is frozen; numbers that could not be computed are ``None`` (shown as "—"),
never 0.

The per-stage summary itself is a pandas DataFrame (one row per stage) whose columns are listed
in :data:`SUMMARY_COLUMNS`, each with its unit in the name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from analysis.diagnosis.facts import DiagnosisFact, FailureMix, SharedHostFact
    from analysis.knee.facts import (
        ClientBoundFact,
        ConfidenceFact,
        GaugeCheckFact,
        KneeSummaryFact,
        LateClientFact,
        NoSignalFact,
        SignalFact,
    )
    from analysis.knee.fit import KneeFit
    from analysis.stages.data_check import RowsFact


Verdict = Literal["comfortable", "critical", "knee", "red_line", "insufficient_data"]
#: how the verdicts are printed in tables (docs/method.md, Verdicts)
VERDICT_LABELS: dict[str, str] = {
    "comfortable": "comfortable",
    "critical": "critical",
    "knee": "knee",
    "red_line": "red line",
    "insufficient_data": "insufficient data",
}

Bottleneck = Literal[
    "none",
    "compute",
    "queueing",
    "memory",
    "prefill",
    "host_side",
    "client",
    "interference",
    "overload",
    "stalls",
    "server_errors",
]

#: Columns of the per-stage summary frame (``analysis.stages.summary.summarize_stages``), in order.
SUMMARY_COLUMNS: tuple[str, ...] = (
    "stage",  # int, as in stages.csv
    "kind",  # baseline | step
    "target_users",  # concurrency of the stage
    "batch_size",
    "window_s",  # length of the measured window
    "requests",  # rows in the measured window (all outcomes, length mismatches included)
    "ok",  # rows with outcome ok
    "errors",  # rows with an error outcome (not ok, not length_mismatch)
    "length_mismatch",  # rows excluded from the statistics for missing the target lengths
    "resent",  # rows sent a second time on a fresh connection (reused socket found closed)
    "success_pct",  # ok / (ok + errors) * 100
    "qps",  # ok requests per second of measured window
    "output_tok_s",  # completion tokens of ok requests per second
    "total_tok_s",  # prompt + completion tokens of ok requests per second
    "e2e_mean_ms",
    "e2e_p50_ms",
    "e2e_p95_ms",
    "e2e_p99_ms",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "ttft_p99_ms",
    "itl_p50_ms",  # median over ok requests of their per-request itl_p50_ms
    "itl_p95_ms",  # P95 over ok requests of their per-request itl_p95_ms
    "tpot_p50_ms",
    "tpot_p95_ms",
    "s_per_1k_total_tokens",  # median e2e seconds per 1000 prompt+completion tokens
    "s_per_1k_completion_tokens",  # median e2e seconds per 1000 completion tokens
    "gpu_mem_peak_pct",
    "gpu_util_mean_pct",
    "sm_util_mean_pct",
    "kv_cache_peak_pct",
    "waiting_mean",
    "waiting_max",
    "running_max",
    "preemptions",  # increase of the preemption counter over the window
    "client_cpu_peak_pct",
    "gpu_idle_pct",  # share of GPU samples at <= 5 % utilisation while users were active
    "prompt_tokens_max",  # longest prompt of an ok request (for --max-model-len)
    "completion_tokens_max",  # longest output of an ok request (for request_timeout_ms)
    "s_per_1k_total_p95",  # P95 of e2e seconds per 1000 prompt+completion tokens (method.md)
    "s_per_1k_total_p99",
    # each request's e2e over its single-user expectation (analysis.stages.slowdown): a length
    # mix's tail, read against one yardstick whatever the lengths
    "slowdown_p50",
    "slowdown_p95",
    "slowdown_p99",
    "running_mean",  # the server's running-requests gauge, mean over the window
    # intervals (analysis.stages.intervals; batch means over time windows, 95 %); NaN: none computed
    "output_tok_s_low",
    "output_tok_s_high",
    "output_tok_s_hw_pct",  # half-width as % of output_tok_s
    "e2e_p95_low_ms",
    "e2e_p95_high_ms",
    "e2e_p99_low_ms",
    "e2e_p99_high_ms",
    "interval_batches",  # time windows behind the intervals; 0: window too short for any
    "window_needed_s",  # measured window that would give throughput ±5 %
    "slowdown_p95_low",  # the slowdown's tail intervals (the same windows as e2e's)
    "slowdown_p95_high",
    "slowdown_p99_low",
    "slowdown_p99_high",
    # queueing seen from the client (analysis.stages.client_queue; NaN without TTFT)
    "client_running",  # requests in service on average, from the rows' TTFT and e2e
    "client_running_low",
    "client_running_high",
    "client_waiting",  # requests waiting for a slot on average (their TTFT excess)
    "client_waiting_low",
    "client_waiting_high",
    "client_in_flight",  # requests outstanding on average (Little's law: served/s × mean e2e)
    "client_wait_share_pct",  # % of requests that came a quarter service time late or more
    "client_wait_ms",  # median wait of those requests
    "client_kv_fill_pct",  # a length mix: the most KV held at a first token, % of the run's most
    # prefix caching (analysis.stages.prefix_cache: the server's counters over the window, tokens)
    "prefix_cache_queries",
    "prefix_cache_hits",
    "prefix_cache_hit_pct",  # hits / queries × 100; NaN: the server exposes no such counters
    # failures the server turned away at once (analysis.stages.refusals): its admission limit
    "refused",  # of ``errors``; NaN: not counted (frames built elsewhere)
    # the load generator's own lateness (client.csv; docs/method.md: Late load generator)
    "client_lag_mean_ms",  # mean of the senders' rows' mean event-loop lag: the late rule's figure
    "client_lag_p95_ms",  # P95 over the window's senders' rows of their largest event-loop lag
    "client_lag_max_ms",  # the largest of them
    "host_load_1m",  # the 1-minute load of the client's host, at its most per CPU in the window
    "host_cpus",  # that host's CPU count
    # the e2e median's 95 % interval from two of the stage's own requests' order statistics
    # (analysis.stages.median_interval: needs no time windows); NaN under 6 requests
    "e2e_p50_low_ms",
    "e2e_p50_high_ms",
)

#: Percentile method used everywhere (numpy/pandas "linear" interpolation on raw rows).
PERCENTILE_METHOD = "exact, from raw per-request rows, linear interpolation (numpy default)"


#: what a baseline warning is about: no stage served a request, a step stage stands in, too few
#: served requests, or the P95 far above the median (external interference)
NoteKind = Literal["no_baseline", "first_stage", "few_requests", "spread"]
#: the figure a spread warning is about: e2e latency (ms) or seconds per 1k total tokens
SpreadFigure = Literal["e2e_ms", "s_per_1k", "tpot_ms"]


@dataclass(frozen=True)
class BaselineNote:
    """One warning on the baseline: ``users`` of the stand-in stage (``first_stage``);
    ``requests`` served against ``min_requests`` (``few_requests``, rule ``baseline``); the
    figure's ``p50`` and ``p95`` against ``limit_ratio`` (``spread``)."""

    kind: NoteKind
    users: int | None = None
    requests: int | None = None
    min_requests: int | None = None
    figure: SpreadFigure | None = None
    p50: float | None = None
    p95: float | None = None
    limit_ratio: float | None = None
    rule: str = "baseline"


@dataclass(frozen=True)
class Baseline:
    """The sequential single-user baseline, or the first stage when there is none."""

    source: Literal["baseline", "first_stage", "none"]
    requests: int
    e2e_p50_ms: float | None
    e2e_p95_ms: float | None
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    s_per_1k_total_p50: float | None
    s_per_1k_total_p95: float | None
    s_per_1k_completion_p50: float | None
    s_per_1k_completion_p95: float | None
    output_tok_s: float | None  # single-user throughput, the yardstick of marginal gain
    #: e.g. P95 far above the median: external interference (words: report.stage_words; a str
    #: is words read back from knee.json)
    warnings: tuple[BaselineNote | str, ...] = ()
    e2e_p99_ms: float | None = None  # the P99 tail, for --knee-tail p99
    stage: int | None = None  # the stage the baseline was taken from
    target_users: int | None = None  # its concurrency (1 for a real baseline)
    s_per_1k_total_p99: float | None = None
    #: the P95 and P99 of its requests' slowdowns (each e2e over the single-user line fitted on
    #: these same requests: about 1; analysis.stages.slowdown), a length mix's yardstick
    slowdown_p95: float | None = None
    slowdown_p99: float | None = None
    # P95 far above the median (a spread warning fired): something outside the test interfered.
    # Set where the warning is written, so the diagnosis never has to parse warning text.
    interference_suspected: bool = False


@dataclass(frozen=True)
class Signal:
    """One rule evaluated on one stage: whether it fired, and the numbers behind it.

    ``fact`` (:mod:`analysis.knee.facts`) is what the rule measured; its words are written by
    :func:`analysis.report.knee_words.signal_text`. ``said`` holds the words of a signal that has
    no fact (one read from a schema-1 knee.json, or made by hand)."""

    name: str  # throughput_flattening | tail_departure | memory_pressure | errors | sla | ...
    fired: bool
    value: float | None
    threshold: float | None
    said: str = ""
    fact: SignalFact | None = None


@dataclass(frozen=True)
class StageVerdict:
    stage: int
    target_users: int
    verdict: Verdict
    reasons: tuple[Reason, ...]  # the rules that fired, as records (their words: report layer)
    signals: tuple[Signal, ...]
    trusted: bool = True  # False when the load generator was the limit (client-bound)
    bottleneck: Bottleneck = "none"
    #: what the bottleneck's rule saw (analysis.diagnosis.facts; its words:
    #: analysis.report.diagnosis_words); "": not diagnosed; another str: words read back
    bottleneck_reason: DiagnosisFact | str = ""
    #: the stage's failures by kind ("": none; a str: words read back from knee.json)
    failures: FailureMix | str = ""
    noisy: bool = False  # throughput interval too wide (or the window too short) to judge


@dataclass(frozen=True)
class KneeResult:
    """What ``find_knee`` returns: a verdict per step stage and the knee, if any."""

    stages: tuple[StageVerdict, ...]
    knee_stage: int | None  # stage index of the first "knee" verdict
    knee_users: int | None
    red_line_stage: int | None
    red_line_users: int | None
    max_concurrency: int | None  # users of the stage before the knee
    base_capacity: int | None  # highest stage with tail in SLA, memory <= 85 %, 100 % success
    #: what the summary says (worded by analysis.report.knee_summary); a str: its words as read
    #: back from knee.json
    summary: KneeSummaryFact | str
    params: dict[str, Any] = field(default_factory=dict)  # thresholds used, for the report
    server_slots: int | None = None  # running maximum while requests waited (server metrics)
    confidence_pct: float | None = None  # share of resamples giving the same max_concurrency
    confidence: ConfidenceFact | str = ""  # the same as a fact ("": not resampled; str: read back)
    capacity: float | None = None  # breakpoint of the rise-then-plateau fit (analysis.knee.fit)
    capacity_low: float | None = None  # its 90 % interval (5th-95th percentile of resamples)
    capacity_high: float | None = None
    capacity_text: KneeFit | str = ""  # the fit over all stages ("": none; str: read back)
    client_slots: int | None = None  # requests run at once while some waited, client-estimated
    #: GPU memory flat across 3 or more stages that quadrupled the users: a pool allocated at
    #: start, which the memory rule does not read as pressure (the plots label it so)
    gpu_preallocated: bool = False

    @property
    def judged(self) -> tuple[StageVerdict, ...]:
        """The stages judged: every one but "insufficient data" (never an answer, nor the top)."""
        return tuple(v for v in self.stages if v.verdict != "insufficient_data")


#: why a level stage's recorded rows cannot be judged as they stand (analysis.stages.coverage):
#: ``not_measured`` the file's rows end before its window opened (a cut file: past the cut);
#: ``no_rows`` stages.csv gives it a window but requests.csv has no measured row of it;
#: ``rows_cut`` the file's rows end inside its window or while its last requests ran, so some of
#: its rows are lost and its rates would read low; ``empty_window`` its measured window is empty
RowFault = Literal["not_measured", "no_rows", "rows_cut", "empty_window"]


@dataclass(frozen=True)
class StageFault:
    """One level stage whose rows disagree with stages.csv: never judged, never an answer."""

    stage: int
    target_users: int
    kind: RowFault
    rows: int  # measured rows recorded for it
    window_s: float | None  # its measured window per stages.csv (None: not recorded)


@dataclass(frozen=True)
class FaultReason:
    """Why a stage whose rows disagree with stages.csv was not judged (its reason): the fault,
    where requests.csv's rows end and where the stage's measured window opened (unix s)."""

    fault: StageFault
    rows_end_unix_s: float | None
    opened_unix_s: float | None


@dataclass(frozen=True)
class RowCoverage:
    """How far the recorded rows cover the stages stages.csv lists."""

    faults: tuple[StageFault, ...] = ()
    rows_end_unix_s: float | None = None  # the latest end of any recorded request
    cut_files: tuple[str, ...] = ()  # files whose last line was cut mid-row (dropped)
    unlisted_stages: tuple[int, ...] = ()  # stages with rows in requests.csv, not in stages.csv

    @property
    def faulted(self) -> frozenset[int]:
        return frozenset(f.stage for f in self.faults)


#: ``no_judged_stage``: no level stage could be judged at all; ``unjudged_below``: the first
#: judged stage already breaks a limit while stages below it could not be judged (their rows
#: are missing or unusable), so "test lower" would be wrong and no level is known safe;
#: ``late_client``: the load generator ran late at a stage (or the baseline) at or below the
#: first level past the answer, so that stage may have moved it (docs/method.md: Late load
#: generator)
#: ``tail_in_doubt``: the answer counts a level as before the knee whose throughput had flattened
#: and whose tail was within the noise of the limit, while the fit over all stages puts the
#: capacity below that level (docs/method.md: Knee from all stages)
#: ``starved_server``: the server shares the load generator's machine, that machine was
#: overloaded at a level that decided the answer (the first past the deploy figure or past the
#: capacity), and the server's throughput fell there: the fall is the CPU it waited for
#: (docs/method.md: Shared host)
CannotTell = Literal[
    "no_judged_stage", "unjudged_below", "late_client", "unsure", "tail_in_doubt", "starved_server"
]


@dataclass(frozen=True)
class Standing:
    """Whether the answer stands on the data (:mod:`analysis.advice.standing`).

    ``answer``: every level stage judged; ``partial``: the answer comes only from the judged
    stages, some were not (``unjudged`` lists their users); ``cannot_tell``: no answer (``reason``
    says why): exit 3, nothing recommended, no cluster file written."""

    kind: Literal["answer", "partial", "cannot_tell"] = "answer"
    reason: CannotTell | None = None
    unjudged: tuple[int, ...] = ()  # users of the level stages not judged
    coverage: RowCoverage = field(default_factory=RowCoverage)
    #: ``late_client``: the late level stages that could have moved the answer, with their lag
    late: tuple[LateClientFact, ...] = ()
    #: ``late_client``: the sequential baseline's lag where it was late (every tail's yardstick)
    baseline_late: LateClientFact | None = None
    #: ``late_client``: the first tested level past the answer (None: the answer is the top)
    first_past: int | None = None
    #: ``tail_in_doubt``: the level whose tail was in doubt
    in_doubt: int | None = None
    #: ``starved_server``: the deciding level on the overloaded shared machine
    starved: SharedHostFact | None = None

    @property
    def cannot_tell(self) -> bool:
        return self.kind == "cannot_tell"


if TYPE_CHECKING:
    #: one reason of a stage's verdict, as judged: a signal that fired (or an undecided tail), the
    #: stage's rows, the client's caveat, the gauges' disagreement, "no signal", why the stage's
    #: rows could not be judged, the stage's failures (:mod:`analysis.diagnosis.failure_mix`); a
    #: ``str`` is words already written (read back from knee.json). Worded by
    #: :mod:`analysis.report.stage_reasons`.
    Reason: TypeAlias = (
        Signal
        | RowsFact
        | ClientBoundFact
        | GaugeCheckFact
        | NoSignalFact
        | FaultReason
        | FailureMix
        | str
    )
