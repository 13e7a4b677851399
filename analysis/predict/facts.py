"""The capacity model's parameters and a prediction, as typed records: no words.

Each parameter is an :class:`Estimate`: a value with its 95 % interval (the interval equal to
the value where the run pins it exactly, e.g. the server's own running maximum) and where it
came from, as a kind from a closed vocabulary; an ``assumed`` source is one the run could not
measure. :mod:`analysis.report.predict_words` words them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from analysis.advice.facts import DeployBound
from analysis.model import CannotTell

#: where the prefill cost per prompt token came from: a line through TTFT against prompt tokens
#: (the lengths varied), a line through the client's timed single-request probes at a few
#: prompt lengths before the sweep (fixed lengths), or the baseline's TTFT less one decode step
#: over its prompt (assumed)
PrefillSource = Literal["ttft_fit", "probe_fit", "baseline_assumed", "in_step"]
#: what a level of ``predict --check`` compares: e2e in ms, or the slowdown (×) of a length mix
LevelMetric = Literal["e2e_ms", "slowdown"]
#: where the decode line came from: each stage's median inter-token latency (streamed), its
#: median TPOT (streamed several tokens a chunk: :func:`analysis.cluster.profile.decode_step`),
#: or its median e2e over the completion tokens at the stages where nothing waited (no tokens
#: streamed: the prefill is then inside the step, ``in_step``)
DecodeSource = Literal["itl", "tpot", "e2e_per_token"]
#: where the slot limit came from: the server's running gauge, the engine's own report of its
#: slots (``engine``: llama-server's ``/props`` ``total_slots``, run.json's ``server.slots``),
#: the concurrency probe's bursts (``probe``: :mod:`analysis.predict.limits_probe`), the
#: client-side estimate, the batch the decode line needs to give the throughput plateau
#: (assumed: none of those), the user's ``--slots`` (``stated``: the engine's own setting), none
SlotSource = Literal[
    "server_gauge", "engine", "probe", "client_estimate", "throughput_plateau", "stated", "none"
]
#: where the KV budget came from: the KV gauge × the tokens in flight; the batch where the knee
#: sat × the tokens each sequence holds (assumed: no gauge); the user's ``--kv-tokens``
#: (``stated``: the engine's pool as its log or config gives it); none for an engine that admits
#: by slot alone (``per_slot``: llama-server); the concurrency probe's bursts (``probe``: fewer
#: streamed at once at twice the prompt), or none where they saw no KV limit (``probe_unseen``);
#: none (no gauge and no knee)
KvSource = Literal[
    "kv_gauge", "knee_assumed", "stated", "per_slot", "probe", "probe_unseen", "none"
]
#: which limit bound a run or a prediction: the slots, the KV budget, the decode step growing
#: with the batch (compute), or none within the levels looked at
Bound = Literal["slots", "kv", "compute", "none"]
#: the decode step the model runs: the fitted line α + β × batch, or the line plus each measured
#: batch's own offset from it (``measured``: where that reproduces the run's own latency better,
#: a step that is no straight line in the batch, such as llama.cpp's one-sequence fast path)
StepModel = Literal["line", "measured"]
#: which signal ended the predicted capacity (loadknee_core.knee_params thresholds): the
#: throughput flattening, the tail departing, the predicted KV use passing the memory threshold
#: (``memory``: only where the source run had a KV gauge, :attr:`CapacityFit.models_memory`)
EndSignal = Literal["flattening", "tail", "memory", "none"]


@dataclass(frozen=True)
class Estimate:
    """A fitted figure with its 95 % interval (``low`` ≤ ``value`` ≤ ``high``)."""

    value: float
    low: float
    high: float

    @classmethod
    def exact(cls, value: float) -> Estimate:
        return cls(value, value, value)


#: what the probe saw: a slot limit, a KV budget (perhaps beside a slot limit), no limit within
#: the burst, or bursts that disagree (fewer at the shorter prompt)
ProbeLimit = Literal["slots", "kv", "unseen", "inconsistent"]


@dataclass(frozen=True)
class Burst:
    """One burst as read: the tokens a request held, how many streamed, at once, and whether
    any waited for room."""

    prompt_tokens: float
    completion_tokens: float
    answered: int
    at_once: int
    queued: bool

    @property
    def context(self) -> float:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class ProbeReading:
    """The two bursts and what they say (see the module docstring)."""

    bursts: tuple[Burst, Burst]  # at the run's prompt, at twice it
    limit: ProbeLimit
    slots: int | None = None  # the slot limit the probe saw
    kv_tokens: Estimate | None = None  # the KV budget it saw, with the span its counts allow


@dataclass(frozen=True)
class Workload:
    """Lengths per request: prompt and completion tokens as the server counts them.

    Fixed lengths, or a mix's means (:mod:`analysis.predict.mix`); ``context_tokens`` is the
    context a running sequence reserves in the KV budget: prompt + completion for fixed
    lengths (None), a mix's mean weighted by each request's time in the batch (its completion)
    for a mix, since the long answers are the ones the batch holds most of the time.
    """

    input_tokens: float
    output_tokens: float
    context_tokens: float | None = None
    #: a mix's ``(prompt, completion)`` records (an even sample of at most
    #: :data:`analysis.predict.mix.PEAK_LENGTHS`), for the KV gauge's stage peak
    #: (:mod:`analysis.predict.kv_peak`); empty for fixed lengths. Left out of the JSON: the
    #: summary figures say the mix; the records are the model's input, not its answer
    lengths: tuple[tuple[float, float], ...] = field(default=(), metadata={"json": False})

    @property
    def reserved_tokens(self) -> float:
        """The KV tokens a running sequence holds: ``context_tokens``, else prompt + completion."""
        if self.context_tokens is not None:
            return self.context_tokens
        return self.input_tokens + self.output_tokens

    @property
    def held_tokens(self) -> float:
        """The KV tokens a running sequence holds on average over its time in the batch: its
        reserved context less half the completion (prompt + half the completion for fixed
        lengths, as it grows a token a step). The context a KV gauge's share is read against
        (:func:`analysis.predict.fit.fit_capacity`) and the KV use predicted from it
        (:mod:`analysis.predict.batching`). A mix: at least its time-weighted held context
        (the half taken off is the mean completion's, not the time-weighted one): the safe side
        for the memory bound."""
        if self.context_tokens is not None:
            return self.context_tokens - self.output_tokens / 2.0
        return self.input_tokens + self.output_tokens / 2.0


#: where a prompt log's completion lengths came from, per record: the observed reply length
#: (``output_tokens``), the request's ``max_tokens`` cap (an upper bound), or neither (the
#: source run's mean completion)
OutputSource = Literal["observed", "cap", "run_mean"]


@dataclass(frozen=True)
class LengthMix:
    """The length mix read from a prompt log (:mod:`analysis.predict.mix`)."""

    log_file: str  # the file's name (never its path or content)
    records: int  # valid records in the log
    bad: int  # records that could not be read
    sampled: int  # records the mix was read from (evenly spaced over the log)
    input_mean: float
    input_p5: float
    input_p95: float
    output_mean: float
    output_p5: float
    output_p95: float
    output_sources: tuple[tuple[OutputSource, int], ...]  # records per source
    input_estimated: int  # text records whose prompt tokens were estimated from characters
    chars_per_token: float  # the estimate's ratio
    workload: Workload  # what the model is driven with


@dataclass(frozen=True)
class GaugeWindow:
    """How the source run's KV gauge saw a stage: its measured window and the samples in it
    (the medians over the judged stages), so that a predicted stage peak is read as often."""

    seconds: float
    samples: int


@dataclass(frozen=True)
class CapacityParams:
    """What the batching model needs (:mod:`analysis.predict.batching`); ms and tokens.

    One engine step costs ``alpha_ms + beta_ms × batch`` plus ``prefill_ms_per_token`` for each
    prompt token it prefills; at most ``slots`` sequences run at once (None: no limit seen) and
    their contexts (prompt + completion) fit ``kv_tokens`` (None: no budget known).
    """

    alpha_ms: Estimate
    beta_ms: Estimate
    prefill_ms_per_token: Estimate
    slots: float | None = None
    kv_tokens: Estimate | None = None


@dataclass(frozen=True)
class RunBound:
    """Which limit bound the measured run, and the figures that say so."""

    bound: Bound
    knee_users: int | None  # the first stage past the capacity (None: none in range)
    running_at_knee: float | None  # the server's mean running batch there (None: no gauge)
    kv_peak_pct_at_knee: float | None  # the KV gauge's peak there (None: no gauge)
    slots: float | None  # the slot limit the run showed
    kv_slots: float | None  # sequences of the run's lengths the KV budget holds


@dataclass(frozen=True)
class CapacityFit:
    """Everything fitted from one run: the parameters, their sources, the run's own figures."""

    run_id: str
    params: CapacityParams
    prefill_source: PrefillSource
    slot_source: SlotSource
    kv_source: KvSource
    workload: Workload  # the lengths the run measured (mean prompt and completion tokens)
    decode_points: int  # stages behind α and β
    decode_r2: float | None
    kv_stage_users: int | None  # the stage the KV budget was read at (gauge or knee)
    kv_pct: float | None  # the gauge's mean there (None: assumed)
    max_batch: float  # the largest batch any stage ran (the decode line's reach)
    max_users: int  # the most users any judged stage had
    measured_capacity: int | None  # the run's own answer (max_concurrency)
    run_bound: RunBound
    host: str | None  # the server the run measured (for the check command)
    levels: tuple[int, ...]  # the run's tested levels
    decode_source: DecodeSource = "itl"
    #: the most tokens a decode stage's stream chunks carried (median request; None: none
    #: counted): above :data:`analysis.cluster.profile.CHUNKED_TOKENS` the line is on TPOT
    tokens_per_chunk: float | None = None
    #: why the run itself cannot tell its capacity (None: it answers); then
    #: ``measured_capacity`` is None and no prediction is made from the fit
    cannot_tell: CannotTell | None = None
    #: the ``(prompt tokens, ms)`` probes behind a ``probe_fit`` prefill (empty otherwise)
    prefill_probes: tuple[tuple[float, float], ...] = ()
    #: ``(users, median e2e ms)`` per judged step or refine level (the median of its stages'
    #: medians), for the in-sample check (:mod:`analysis.predict.insample`); empty: none kept
    measured_e2e_ms: tuple[tuple[int, float], ...] = ()
    #: ``(batch, ms)``: how far each measured batch's median step sat above the line (below:
    #: negative), the median over its stages, by batch; empty: no decode points kept
    step_offsets: tuple[tuple[float, float], ...] = ()
    #: which step the model runs (:data:`StepModel`); ``measured`` where the offsets reproduce
    #: the run's own latency better than the line (:func:`analysis.predict.whatif.best_reproducing`)
    step_model: StepModel = "line"
    #: the run's deploy answer (``loadknee analyze``'s first number; None: none, or it cannot
    #: tell): below ``measured_capacity`` where the tail departed before the knee
    measured_deploy: int | None = None
    #: the concurrency probe's reading (None: the run sent none, or it said nothing)
    probe: ProbeReading | None = None
    #: the run read a KV gauge (vLLM's ``kv_cache_usage_perc``), whether or not the budget
    #: is its reading (``kv_source``: ``kv_gauge``, or ``stated`` beside a gauge)
    kv_gauge_read: bool = False
    #: how the KV gauge sampled a stage (None: no gauge read): a mix's predicted stage peak
    #: (:mod:`analysis.predict.kv_peak`) is read the same way
    gauge_window: GaugeWindow | None = None

    @property
    def models_memory(self) -> bool:
        """Whether the prediction judges memory (:data:`EndSignal` ``memory``): where the KV
        budget came with a KV gauge, its own or a stated one beside it. Why only then: the
        analysis judges memory on the gauge, so without one there is no memory bound to mirror
        (and a budget assumed from the knee only restates the slots)."""
        gauged = self.kv_source == "kv_gauge" or (self.kv_source == "stated" and self.kv_gauge_read)
        return gauged and self.params.kv_tokens is not None

    @property
    def step_shape(self) -> tuple[tuple[float, float], ...]:
        """The offsets the model adds to the line: the measured ones, or none for the line."""
        return self.step_offsets if self.step_model == "measured" else ()


@dataclass(frozen=True)
class LevelFigures:
    """The model's figures at one concurrency level (closed loop, no think time)."""

    users: int
    batch: float  # sequences running at once
    limit: Bound  # what capped the batch below the users ("none": every user runs)
    step_ms: float  # one engine step, prefill share included
    ttft_ms: float  # queue wait + the admitting step
    e2e_ms: float
    output_tok_s: float
    tail_ratio: float  # e2e over the 1-user e2e
    gain_ratio: float | None  # (X_N − X_{N−1}) / X_1; None at 1 user
    kv_pct: float | None = None  # the predicted KV use (None: memory not modelled)


@dataclass(frozen=True)
class Capacity:
    """The capacity one parameter set gives: the last level before a signal fires."""

    users: int | None  # None: the first level already breaks (or nothing fits)
    ends_with: EndSignal  # what fired at users + 1 ("none": nothing fired up to the top level)
    bound: Bound  # what capped the batch where it fired (``kv`` where memory ended it)
    batch: float | None  # the batch at the capacity
    offline_users: int | None  # the last level before throughput flattens (the batch figure)


@dataclass(frozen=True)
class InSampleMiss:
    """The model at its own run's lengths against what the run measured, at one level (the
    worst of the levels up to the run's capacity: :mod:`analysis.predict.insample`)."""

    users: int
    model_ms: float  # the model's e2e there (the point parameters: every request's)
    measured_ms: float  # the run's median e2e there
    miss: float  # (model − measured) / measured
    limit: float  # the largest |miss| the prediction accepts


#: why a prediction gives no number: the decode line could not be fitted; the capacity lies
#: beyond twice the largest batch the run measured; the run it was fitted from cannot tell its
#: own capacity ("cannot tell" in ``loadknee analyze``: a what-if from it would read that doubt
#: as a number — its slot limit and KV budget lean on the run's answer); the model misses the
#: run it was fitted from by more than its limit (``model_misfit``: its shape is not the
#: server's, and its interval cannot say so — :class:`InSampleMiss` holds the facts)
Refusal = Literal["no_decode_fit", "beyond_measured", "source_cannot_tell", "model_misfit"]


@dataclass(frozen=True)
class Prediction:
    """The predicted capacity at a workload, with its interval and what bounds it."""

    workload: Workload
    fit: CapacityFit
    point: Capacity | None  # at the fitted values (None: refused)
    low: int | None  # 5th and 95th percentiles over resampled parameters
    high: int | None
    offline_low: int | None
    offline_high: int | None
    resamples: int
    levels: tuple[LevelFigures, ...]  # the point's figures, 1 user to a little past it
    extrapolated: bool  # the batch at the capacity exceeds what any stage ran
    widened_by: float  # the factor β's interval was widened by (1: not widened)
    refusal: Refusal | None
    kv_slots: float | None  # sequences of the new lengths the KV budget holds
    check_levels: tuple[int, ...]  # the levels a run to check it should test
    tail_ratio_limit: float = 2.0  # the knee thresholds the capacity was judged with
    flat_gain_limit: float = 0.15
    memory_limit: float | None = None  # the memory threshold (None: memory not modelled)
    misfit: InSampleMiss | None = None  # the miss behind a ``model_misfit`` refusal
    #: the stage a mix's KV use was read over as its simulated peak (:mod:`~.kv_peak`); None:
    #: the mean use (fixed lengths, no gauge, or no window known)
    peak_window: GaugeWindow | None = None


#: where a checked run's lengths came from: its ok rows' mean tokens, or run.json's prompt
#: source (no ok row counted them)
WorkloadSource = Literal["rows", "run_json"]


#: the deploy answer's bounds the model judges too: the knee (a queue, or a soft knee answered
#: before the tail departs), the tail alone, and the tested range; an answer bound by an SLA,
#: memory or errors is held against the run's knee instead (the model predicts none of them),
#: except memory where the prediction models it (:func:`modelled_bounds`)
MODELLED_BOUNDS: frozenset[DeployBound] = frozenset({"knee", "tail", "tested_range"})


def modelled_bounds(memory: bool) -> frozenset[DeployBound]:
    """The deploy answer's bounds a prediction judges: :data:`MODELLED_BOUNDS`, and memory
    where it predicts the KV use (``memory``: :attr:`CapacityFit.models_memory`)."""
    return MODELLED_BOUNDS | {"memory"} if memory else MODELLED_BOUNDS


@dataclass(frozen=True)
class MeasuredRun:
    """What a second run measured, to check a prediction against (:mod:`analysis.predict.check`)."""

    run_id: str
    workload: Workload
    workload_source: WorkloadSource
    #: what the prediction's capacity is held against: the run's deploy answer (``loadknee
    #: analyze``'s first number: before the first stage that breaks a limit, or before the tail
    #: departs where nothing queued), or its knee's figure where the deploy answer was bound
    #: by a rule the model does not judge (``deploy_bound``: an SLA, errors, memory where the
    #: prediction models none: :func:`~.check.measured_run` holds it so, and
    #: :func:`~.check.check` holds it again for a prediction that models memory)
    capacity: int | None
    past_users: int | None  # the first stage past the capacity (None: not reached)
    levels: tuple[int, ...]  # its step levels
    p95_e2e_ms: tuple[tuple[int, float], ...]  # (users, P95 e2e) per step level
    #: (users, P95 slowdown) per step level where its tail is each request's slowdown (a
    #: length mix: :mod:`analysis.stages.slowdown`); empty otherwise
    p95_slowdown: tuple[tuple[int, float], ...] = ()
    #: why the run cannot tell its capacity (None: it answers); then ``capacity`` and
    #: ``past_users`` are None: there is no measured capacity to check against
    cannot_tell: CannotTell | None = None
    #: its knee's figure (``max_concurrency``: the stage before throughput stops growing) and
    #: the first stage past it: what the prediction's offline batch predicts (None: no knee
    #: measured, or the run cannot tell)
    knee_capacity: int | None = None
    knee_past_users: int | None = None
    #: its deploy answer and the rule that bound it (None: no answer, or it cannot tell), and
    #: the first stage past the answer (None: the tested range bound it, or none)
    deploy_users: int | None = None
    deploy_bound: DeployBound | None = None
    deploy_past_users: int | None = None
    #: how its KV gauge sampled a stage (None: no gauge read): a mix's predicted stage peak is
    #: read as this run read its own (:func:`~.check.check`)
    gauge_window: GaugeWindow | None = None


@dataclass(frozen=True)
class LevelCheck:
    """One level: the model's e2e (every request's: the model has no spread) vs the P95; for a
    run whose tail is each request's slowdown (a length mix: ``metric`` ``slowdown``), the
    model's e2e over its own e2e at one user vs the P95 slowdown (×, not ms)."""

    users: int
    predicted: float
    low: float | None  # 5th–95th percentile over the resampled parameters
    high: float | None
    measured_p95: float
    error: float  # (predicted − measured) / measured
    inside: bool  # low ≤ measured ≤ high
    metric: LevelMetric = "e2e_ms"


@dataclass(frozen=True)
class Agreement:
    """One predicted figure against what a run measured.

    A run's levels place a capacity between it and its next level less one
    (``measured_low``..``measured_high``; ``measured_high`` None: the top level, no stage past
    it; both the capacity where it is no tested level: a gauge, not the levels, set it): the
    prediction agrees (``inside``) where its interval meets that span, and ``error`` is the
    point's distance from the span over the measured figure (0 within it); ``raw_error`` is
    (point − measured) / measured. None where either side has no number.
    """

    measured: int | None
    measured_low: int | None
    measured_high: int | None
    inside: bool | None
    error: float | None
    raw_error: float | None


@dataclass(frozen=True)
class Check:
    """A prediction at another run's lengths against what that run measured: ``deploy``, the
    prediction's deploy figure (before the tail departs, the throughput flattens or, where it
    models memory, the KV use passes the memory threshold) against the run's deploy answer
    (:attr:`MeasuredRun.capacity`); ``offline``, its offline batch (before
    the throughput flattens alone) against the run's knee (``max_concurrency``). On a slot- or
    KV-bound server the two coincide; on a server with no hard limit the tail doubles well
    before the throughput stops growing, and each figure has its own yardstick."""

    prediction: Prediction
    measured: MeasuredRun
    deploy: Agreement
    offline: Agreement
    levels: tuple[LevelCheck, ...]
    #: the run's deploy answer was bound by what the prediction does not judge (an SLA,
    #: errors, or memory where it does not model memory), so ``deploy`` is against its knee
    deploy_against_knee: bool = False
