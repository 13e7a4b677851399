"""The knee's signals: each rule of :mod:`analysis.knee.find` evaluated on one stage, with its
numbers.

Each function takes one summary row (and the previous served stage where the rule compares two)
plus the :class:`StageContext` every stage is compared against, and returns
:class:`~analysis.model.Signal` objects whose ``fact`` (:mod:`analysis.knee.facts`) records what
was measured against which threshold; :mod:`analysis.report.knee_words` says it in words.
:func:`analysis.knee.stage_verdict.evaluate_stage` turns them into a verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from analysis.knee.facts import (
    AbsentFact,
    ClientCpuFact,
    ErrorsFact,
    GainFact,
    GainKind,
    MemoryFact,
    MemoryKind,
    MemorySource,
    NoiseFact,
    OomFact,
    ServerQueueFact,
    SlaFact,
    TailFact,
    TailSource,
    tail_column,
    tail_metric,
)
from analysis.knee.refusal_signal import refusal_signal
from analysis.model import Signal
from loadknee_core.numeric import num
from loadknee_core.red_line import crosses_red_line
from loadknee_core.refusals import stage_refuses

if TYPE_CHECKING:
    from analysis.knee.fit import KneeFit
    from loadknee_core.knee_params import KneeParams


@dataclass(frozen=True)
class StageContext:
    """What every stage is compared against."""

    x1: float | None  # single-user throughput
    base_tail_ms: float | None  # the baseline's tail figure (ms, or s per 1k tokens)
    tail_percentile: str  # the one used: the asked one, or the other when the baseline lacks it
    gpu_flat: bool  # GPU memory the same at every stage: pre-allocated, says nothing
    params: KneeParams
    server_slots: float | None = None  # the highest running count the server reported
    tail_source: TailSource = "baseline"  # whose tail base_tail_ms is
    client_slots: float | None = None  # the most requests running at once, client-estimated
    fit: KneeFit | None = None  # the rise-then-plateau fit over all stages (analysis.knee.fit)
    gpu_preallocated: bool = False  # flat across 3 or more stages that doubled the users or more
    #: the yardstick's lower bound (its own stage's interval): a yardstick inflated by noise
    #: makes a held tail unsure, not held
    base_tail_low_ms: float | None = None
    #: the single-user e2e median (ms): one user's rate by Little's law (:func:`latency_gain`)
    base_median_ms: float | None = None


def _memory_pct(row: pd.Series, ctx: StageContext) -> tuple[float | None, MemorySource]:
    kv, gpu = num(row.get("kv_cache_peak_pct")), num(row.get("gpu_mem_peak_pct"))
    source = ctx.params.memory_source
    if source == "kv_cache":
        return kv, "kv_cache"
    if source == "gpu":
        return gpu, "gpu"
    if kv is None:
        # no KV gauge (no /metrics): GPU memory flat across the stages is a pre-allocated pool
        # (vLLM behind a gateway) and says nothing; read as pressure it made every stage unsafe
        return (None, "gpu_preallocated") if ctx.gpu_preallocated else (gpu, "gpu")
    if gpu is None or ctx.gpu_flat:
        return kv, "kv_cache"
    return (kv, "kv_cache") if kv >= gpu else (gpu, "gpu")


def half_width(row: pd.Series, column: str) -> float | None:
    """Half-width of ``column``'s interval in its own unit (from output tok/s' relative one)."""
    pct, x = num(row.get("output_tok_s_hw_pct")), num(row.get(column))
    if pct is None or x is None or math.isinf(pct):
        return None
    return abs(x) * pct / 100.0


#: how far a stage's rate by latency may sit from its true rate beside its sampling interval
#: (:func:`latency_gain`): the median stands in for the mean, the users for the requests in
#: flight. The 40-slot simulator at 32 → 34 users (0.15× by its step costs) read 0.12×, at most
#: 0.14× by the order statistics alone: 0.4 % off in each rate, and at 32 users 1 % of the rate
#: is 0.16× of one user's rate per added user. 3 % keeps such a stage well clear of the rule
#: (at most 0.38× there) while a doubling (4 → 8 users) still reads clearly flat (at most 0.09×).
LATENCY_RATE_ALLOWANCE = 0.03

#: a stage whose requests in flight fell short of its users by more than this share had think
#: time or gaps between requests: its users over its latency is not its rate (Little's law)
CLOSED_LOOP_SHARE = 0.9


def _closed_loop_median(row: Any) -> tuple[float, float, float, float] | None:
    """The stage's users, e2e median and its interval's ends (ms), where each user kept one
    request in flight (a closed loop without think time: :data:`CLOSED_LOOP_SHARE`)."""
    users, batch = num(row.get("target_users")), num(row.get("batch_size"))
    in_flight = num(row.get("client_in_flight"))
    median = num(row.get("e2e_p50_ms"))
    low, high = num(row.get("e2e_p50_low_ms")), num(row.get("e2e_p50_high_ms"))
    if users is None or in_flight is None or median is None or low is None or high is None:
        return None
    if (batch is not None and batch != 1) or in_flight < CLOSED_LOOP_SHARE * users or low <= 0:
        return None
    return users, median, low, high


def latency_gain(row: Any, prev: Any, ctx: StageContext) -> tuple[float | None, float | None]:
    """What each added user brought as a share of one user's rate, read by Little's law: a
    closed loop serves its users over their mean latency per second, and with fixed lengths
    (the tail on e2e) the median stands in for the mean; one user alone serves one over the
    single-user median. Returns the gain and its upper bound within both medians' intervals
    (:mod:`analysis.stages.median_interval`), each rate widened by
    :data:`LATENCY_RATE_ALLOWANCE`; ``(None, None)`` where the loop was not closed,
    the lengths vary, or a median or its interval is missing.

    Why: a stage shorter than five of its requests has no throughput interval, and its
    flattening on point figures cannot clear the noise; the latency can. The 12-slot
    compute-bound simulator (4 → 8 users, its compute limit near 3.9) read a point gain of
    0.07× beside a CPU hog and a suite on 2 cores, no interval at 8 users: the server's free
    slots demoted the knee and the answer doubled to 8. Its medians (713 → 1,257 ms, 44
    requests) give 0.06×, at most 0.09×."""
    if tail_metric(ctx.params.tail_metric) != "e2e" or not ctx.base_median_ms:
        return None, None
    now, before = _closed_loop_median(row), _closed_loop_median(prev)
    if now is None or before is None or now[0] <= before[0]:
        return None, None
    (users, median, low, _), (prev_users, prev_median, _, prev_high) = now, before
    one_user = ctx.base_median_ms / (users - prev_users)
    gain = (users / median - prev_users / prev_median) * one_user
    most, least = 1.0 + LATENCY_RATE_ALLOWANCE, 1.0 - LATENCY_RATE_ALLOWANCE
    upper = (users / low * most - prev_users / prev_high * least) * one_user
    return gain, upper


def throughput_signals(
    row: pd.Series, prev: pd.Series | None, ctx: StageContext
) -> tuple[Signal, Signal]:
    """Flattening fires only when it clears the noise: the gain's upper bound (both stages'
    95 % intervals, independent, added in quadrature) is below ``flat_gain_ratio``. Without
    intervals (a typed-in table) the point figure decides."""
    p, col = ctx.params, ctx.params.throughput_column
    figures: dict[str, float | None] = {}
    gain: float | None = None
    upper: float | None = None
    if prev is not None and ctx.x1:
        x, x_prev = num(row[col]), num(prev[col])
        dc = float(row["target_users"]) - float(prev["target_users"])
        if x is not None and x_prev is not None and dc > 0:
            gain = (x - x_prev) / dc / ctx.x1
            hw, hw_prev = half_width(row, col), half_width(prev, col)
            if p.noise_aware and hw is not None and hw_prev is not None:
                upper = gain + math.hypot(hw, hw_prev) / dc / ctx.x1
            figures = {
                "prev_users": float(prev["target_users"]),
                "users": float(row["target_users"]),
                "prev_rate": x_prev,
                "rate": x,
                "single_user_rate": ctx.x1,
                "added_per_user": (x - x_prev) / dc,
                "gain_ratio": gain,
                "gain_upper_ratio": upper,
            }
            latency, latency_upper = latency_gain(row, prev, ctx)
            if latency is not None:
                figures["latency_gain_ratio"] = latency
                figures["latency_gain_upper_ratio"] = latency_upper

    def below(name: str, kind: GainKind, figure: float | None, limit: float) -> Signal:
        fired = figure is not None and figure < limit
        return Signal(name, fired, gain, limit, fact=GainFact(kind, col, limit, **figures))

    decisive = upper if upper is not None else gain
    return (
        below("throughput_flattening", "flattening", decisive, p.flat_gain_ratio),
        below("gain_narrowing", "narrowing", gain, p.narrowing_gain_ratio),
    )


def tail_undecided(tail: Signal) -> bool:
    """The tail signal did not fire, yet its interval reaches the limit: neither departed nor
    held, and the stage says so.

    It fires on the lower bound of the ratio's interval. Undecided is the rest of the interval
    across the limit: the point figure at or past it with noise below it, or the point figure
    below it with the upper bound (the stage's tail at its high end over the yardstick at its
    low end) at or past it. A busy machine widens the stage's interval, and inflates the
    single-user yardstick itself (a 1-user level at P95 11.7 s for a P50 of 2.4 s, beside a
    suite on 2 cores), until a tail that has truly left the single-user one (an 8-slot server
    at 16 users) reads 0.99× the yardstick: silence would read as "held".
    """
    fact = tail.fact
    return isinstance(fact, TailFact) and fact.outcome == "undecided"


def _outcome(
    fired: bool, ratio: float | None, upper: float | None, limit: float
) -> Literal["departed", "undecided", "held"]:
    if fired:
        return "departed"
    if ratio is not None and (ratio >= limit or (upper is not None and upper >= limit)):
        return "undecided"
    return "held"


@dataclass(frozen=True)
class TailFigures:
    """A stage's tail on its metric's own scale: the figure, its interval's ends and the
    median (None: not measured)."""

    tail: float | None
    low: float | None
    high: float | None
    median: float | None


def tail_figures(row: Any, metric: str, percentile: str) -> TailFigures:
    """``row``'s tail of ``metric`` at ``percentile`` with its interval: e2e's and the
    slowdown's own (resampled time windows); seconds per 1k tokens carry the e2e interval's
    relative width, and the e2e median's ratio to its tail, to their own figure."""
    column = tail_column(metric, percentile)
    tail = num(row.get(column))
    if tail_metric(metric) == "slowdown":
        return TailFigures(
            tail,
            num(row.get(f"{column}_low")),
            num(row.get(f"{column}_high")),
            num(row.get("slowdown_p50")),
        )
    e2e = num(row.get(f"e2e_{percentile}_ms"))
    scale = (
        1.0 if tail_metric(metric) == "e2e" else (tail / e2e if tail is not None and e2e else None)
    )

    def scaled(value: float | None) -> float | None:
        return None if value is None or scale is None else value * scale

    return TailFigures(
        tail,
        scaled(num(row.get(f"e2e_{percentile}_low_ms"))),
        scaled(num(row.get(f"e2e_{percentile}_high_ms"))),
        scaled(num(row.get("e2e_p50_ms"))),
    )


def _median_lower_ratio(row: Any, ctx: StageContext) -> float | None:
    """The stage's e2e median at its interval's low end over the e2e yardstick (None for
    another tail metric, or without the interval)."""
    low = num(row.get("e2e_p50_low_ms"))
    if tail_metric(ctx.params.tail_metric) != "e2e" or low is None or not ctx.base_tail_ms:
        return None
    return low / ctx.base_tail_ms


def tail_signals(row: pd.Series, ctx: StageContext) -> tuple[Signal, Signal | None]:
    """Tail departure fires only when the tail's lower bound (its 95 % interval, from
    resampling time windows) is at or above ``tail_ratio`` × the baseline's tail; without an
    interval the point figure decides. It is undecided, not held, where the upper bound (the
    stage's tail at its interval's high end, or its point figure without one, over the
    yardstick's low end) reaches the limit."""
    p = ctx.params
    figures = tail_figures(row, p.tail_metric, ctx.tail_percentile)
    tail = figures.tail
    ratio = tail / ctx.base_tail_ms if tail is not None and ctx.base_tail_ms else None
    lower = upper = None
    if p.noise_aware and ratio is not None and figures.low is not None:
        lower = figures.low / ctx.base_tail_ms  # type: ignore[operator]
    base_low = ctx.base_tail_low_ms
    if p.noise_aware and ratio is not None and tail and base_low is not None and base_low > 0:
        # without a stage interval its point figure is the high end: the yardstick's own
        # spread still reaches the limit (a 6-request baseline's P95 one slow request above
        # its median put twice the slots at 1.96x, "held", and the answer at twice the truth)
        upper = max(figures.high or tail, tail) / base_low
    decisive = lower if lower is not None else ratio
    fired = decisive is not None and decisive >= p.tail_ratio
    fact = TailFact(
        "tail",
        ctx.tail_percentile,
        tail_metric(p.tail_metric),
        tail,
        ctx.base_tail_ms,
        ctx.tail_source,
        ratio,
        lower,
        p.tail_ratio,
        _outcome(fired, ratio, upper, p.tail_ratio),
        upper_ratio=upper,
        median_lower_ratio=_median_lower_ratio(row, ctx),
    )
    departed = Signal("tail_departure", fired, ratio, p.tail_ratio, fact=fact)
    tail = num(row[f"e2e_{ctx.tail_percentile}_ms"])  # the SLA is on latency
    sla = None
    if p.sla_ms is not None:
        sla = Signal(
            "sla",
            tail is not None and tail > p.sla_ms,
            tail,
            p.sla_ms,
            fact=SlaFact("sla", ctx.tail_percentile, tail, p.sla_ms),
        )
    return departed, sla


def memory_signals(
    row: pd.Series, prev: pd.Series | None, ctx: StageContext
) -> tuple[Signal, Signal, Signal]:
    p = ctx.params
    mem, source = _memory_pct(row, ctx)
    gpu = num(row.get("gpu_mem_peak_pct"))

    def reached(kind: MemoryKind, limit: float) -> Signal:
        fired = mem is not None and mem >= limit
        return Signal(kind, fired, mem, limit, fact=MemoryFact(kind, source, mem, limit))

    pressure, risk = (
        reached("memory_pressure", p.memory_pressure_pct),
        reached("oom_risk", p.oom_risk_pct),
    )
    failed = int(row["errors"])
    oom = Signal(
        "oom",
        gpu is not None and gpu >= p.oom_pct and failed > 0,
        gpu,
        p.oom_pct,
        fact=OomFact("oom", gpu, failed, p.oom_pct),
    )
    before = num(prev.get("gpu_mem_peak_pct")) if prev is not None else None
    if (
        not oom.fired
        and failed > 0
        and gpu is not None
        and before is not None
        and before >= p.memory_pressure_pct
        and gpu < before / 2
    ):
        oom = Signal(
            "oom", True, gpu, p.oom_pct, fact=OomFact("oom_crash", gpu, failed, p.oom_pct, before)
        )
    return pressure, risk, oom


def error_signals(row: pd.Series, ctx: StageContext) -> tuple[Signal, Signal]:
    p = ctx.params
    success = num(row["success_pct"])
    error_pct = None if success is None else 100.0 - success
    errors, served = int(row["errors"]), int(row["ok"]) + int(row["errors"])
    some = Signal(
        "errors",
        errors > 0,
        error_pct,
        0.0,
        fact=ErrorsFact("errors", success, errors, served, 0.0),
    )
    if stage_refuses(int(num(row.get("refused")) or 0), errors, int(row["ok"])):
        # the server's admission limit: past the capacity at any share (refusals.py)
        return some, refusal_signal(errors, served, error_pct)
    red = Signal(
        "error_rate",
        crosses_red_line(requests=served, errors=errors, limit_pct=p.red_line_error_pct),
        error_pct,
        p.red_line_error_pct,
        fact=ErrorsFact("error_rate", success, errors, served, p.red_line_error_pct),
    )
    return some, red


def client_signal(row: pd.Series, ctx: StageContext) -> Signal:
    cpu = num(row.get("client_cpu_peak_pct"))
    limit = ctx.params.client_cpu_limit_pct
    return Signal(
        "client_bound",
        cpu is not None and cpu >= limit,
        cpu,
        limit,
        fact=ClientCpuFact("client_cpu", cpu, limit),
    )


def _server_queue(row: pd.Series, ctx: StageContext) -> tuple[float, float, float, float] | None:
    """The stage's mean running and waiting counts, the server's slots (``server_slots``) and
    the requests in flight (users × batch); None where the server reports no queue."""
    running, waiting = num(row.get("running_mean")), num(row.get("waiting_mean"))
    slots = ctx.server_slots
    if running is None or waiting is None or not slots:
        return None
    return running, waiting, slots, float(row["target_users"]) * (num(row.get("batch_size")) or 1.0)


def saturation_signal(row: pd.Series, ctx: StageContext) -> Signal:
    """The server's own word: requests waited while the running count sat at its maximum.

    Only where more requests are in flight (users × batch) than the server ever ran at once.

    ``server_slots`` is the highest running count the server reported in any stage (its batch
    slots, in effect). A stage whose mean waiting count is at least ``saturated_waiting`` while
    its running count reached at least ``saturated_running_share`` of the slots is saturated,
    whatever a noisy throughput figure says: added users only queue.

    "Reached" is the stage's highest running sample, not its mean: identical closed-loop
    requests finish together, so the gauge dips between batches, and a 2 s window holds four
    samples. The 10-slot simulator at 12 users showed 2.0 waiting on average, a running maximum
    of 10 and a running mean of 6.0; judged by the mean it was "not saturated" and the sweep
    recommended 12 for 10 slots. With more requests in flight than the slots, a queue that
    persists on average is the slots being full.

    Under a KV budget the limit moves with the lengths: a length mix fits more short requests
    than long ones, so the most the server ever ran (13, short ones) stands above what it runs
    on average (10.4-11.3 on the KV-bound simulator with a lognormal mix). There, at 12 users,
    1.6 waited on average with the KV cache at 90 % while 12 in flight was below the most it
    ran; the sweep called the stage fine and put the capacity at 13. A stage with fewer in
    flight than the most the server ran, whose KV cache peaked at the memory-pressure threshold,
    is saturated by the same waiting queue once more requests are in flight than it ran on
    average. At exactly the most it ran the queue may be between steps, KV full or not (two
    workers at 16 users on a KV budget of 16 sequences: full, 1 or more waiting, not past it)."""
    p, queue = ctx.params, _server_queue(row, ctx)
    if queue is None:
        return Signal("server_saturated", False, None, None, fact=AbsentFact("no_server_queue"))
    running, waiting, slots, in_flight = queue
    peak = num(row.get("running_max"))
    peak = running if peak is None else max(peak, running)
    # with no more requests in flight than the server ever ran, a waiting request is only
    # between scheduler steps (16 users on 16 slots showed 1.2 waiting on average; so did 16
    # users on a KV budget of 16 sequences, its cache full), unless the KV cache was full below
    # the most it ran: then fewer fit than it could run (the docstring)
    kv = num(row.get("kv_cache_peak_pct"))
    kv_full = kv is not None and kv >= p.memory_pressure_pct and in_flight < slots
    fired = (
        (in_flight > slots or (kv_full and in_flight > running))
        and waiting >= p.saturated_waiting
        and peak >= p.saturated_running_share * slots
    )
    return Signal(
        "server_saturated",
        fired,
        waiting,
        p.saturated_waiting,
        fact=ServerQueueFact(
            "server_saturated",
            running,
            slots,
            waiting,
            in_flight,
            p.saturated_waiting,
            running_peak=peak,
            running_share=p.saturated_running_share,
            kv_peak_pct=kv if kv_full else None,
            kv_pressure_pct=p.memory_pressure_pct if kv_full else None,
        ),
    )


def free_slots_signal(row: pd.Series, ctx: StageContext) -> Signal:
    """The server's own word the other way: nothing waited and slots were free.

    Fires when the server reports its queue, a stage had no more requests in flight (users ×
    batch) than the server's running maximum (``server_slots``), and its mean waiting count
    stayed below ``saturated_waiting``, or would all have fit the slots free on average: every
    added user was admitted at once, or waited for the server's next step rather than for a
    slot, so the stage is not saturated. A 40-slot simulator on a machine at load 6.6 on 2
    cores read 2.5 waiting at 34 users with 30.5 running (9.5 slots free): each arrival waited
    for a step the starved process was slow to take; the noisy flattening there stood as the
    knee and the answer was 32 for 40. :func:`analysis.knee.queue_demotions.demote_unsaturated`
    lets this overrule a flattening seen by the client only where the client's figure is
    untrusted (no interval, or one too wide)."""
    p, queue = ctx.params, _server_queue(row, ctx)
    if queue is None:
        return Signal("server_free_slots", False, None, None, fact=AbsentFact("no_server_queue"))
    running, waiting, slots, in_flight = queue
    beyond_free = waiting - max(0.0, slots - running)  # those no free slot could have taken
    fired = in_flight <= slots and min(waiting, beyond_free) < p.saturated_waiting
    return Signal(
        "server_free_slots",
        fired,
        waiting,
        p.saturated_waiting,
        fact=ServerQueueFact(
            "server_free_slots", running, slots, waiting, in_flight, p.saturated_waiting
        ),
    )


def noise_signal(row: pd.Series, ctx: StageContext) -> Signal:
    """Whether the stage is too noisy (or too short) to judge: its throughput interval wider
    than ``max_interval_pct``, or no interval from a stage that has raw rows."""
    p = ctx.params
    batches, pct = num(row.get("interval_batches")), num(row.get("output_tok_s_hw_pct"))
    need = num(row.get("window_needed_s"))
    limit, target = p.max_interval_pct, p.target_interval_pct
    if batches is None:  # no raw rows behind this table: nothing to judge the noise by
        return Signal("noisy", False, None, limit, fact=AbsentFact("no_interval"))
    if batches == 0 or pct is None:
        window = num(row.get("window_s"))
        fact = NoiseFact("window_too_short", limit, target, need, window_s=window)
        return Signal("noisy", int(row["ok"]) > 0, None, limit, fact=fact)
    fact = NoiseFact("interval", limit, target, need, width_pct=pct, windows=batches)
    return Signal("noisy", fact.too_wide, pct, limit, fact=fact)
