"""The knee's signals: each rule of :mod:`analysis.knee.find` evaluated on one stage, with its
numbers.

Each function takes one summary row (and the previous served stage where the rule compares two)
plus the :class:`StageContext` every stage is compared against, and returns
:class:`~analysis.model.Signal` objects whose ``text`` says, in words and numbers, what was
measured against which threshold. :func:`analysis.knee.find.evaluate_stage` turns them into a
verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from analysis import rules
from analysis.knee.refusal_signal import refusal_signal
from analysis.model import Signal
from analysis.numeric import fmt, num
from loadknee_locust.sweep.refusals import stage_refuses

if TYPE_CHECKING:
    from analysis.knee.find import KneeParams
    from analysis.knee.fit import KneeFit


@dataclass(frozen=True)
class StageContext:
    """What every stage is compared against."""

    x1: float | None  # single-user throughput
    base_tail_ms: float | None  # the baseline's tail figure (ms, or s per 1k tokens)
    tail_percentile: str  # the one used: the asked one, or the other when the baseline lacks it
    gpu_flat: bool  # GPU memory the same at every stage: pre-allocated, says nothing
    params: KneeParams
    server_slots: float | None = None  # the highest running count the server reported
    tail_source: str = "the baseline's"  # whose tail base_tail_ms is, as the reasons say it
    client_slots: float | None = None  # the most requests running at once, client-estimated
    fit: KneeFit | None = None  # the rise-then-plateau fit over all stages (analysis.knee.fit)
    gpu_preallocated: bool = False  # flat across 3 or more stages that doubled the users or more


def _memory_pct(row: pd.Series, ctx: StageContext) -> tuple[float | None, str]:
    kv, gpu = num(row.get("kv_cache_peak_pct")), num(row.get("gpu_mem_peak_pct"))
    source = ctx.params.memory_source
    if source == "kv_cache":
        return kv, "KV-cache"
    if source == "gpu":
        return gpu, "GPU memory"
    if kv is None:
        # no KV gauge (no /metrics): GPU memory flat across the stages is a pre-allocated pool
        # (vLLM behind a gateway) and says nothing; read as pressure it made every stage unsafe
        return (
            (None, "GPU memory (flat across stages: pre-allocated)")
            if ctx.gpu_preallocated
            else (
                gpu,
                "GPU memory",
            )
        )
    if gpu is None or ctx.gpu_flat:
        return kv, "KV-cache"
    return (kv, "KV-cache") if kv >= gpu else (gpu, "GPU memory")


def half_width(row: pd.Series, column: str) -> float | None:
    """Half-width of ``column``'s interval in its own unit (from output tok/s' relative one)."""
    pct, x = num(row.get("output_tok_s_hw_pct")), num(row.get(column))
    if pct is None or x is None or math.isinf(pct):
        return None
    return abs(x) * pct / 100.0


#: how a throughput column is named in a sentence
RATE_UNITS = {"output_tok_s": "tok/s", "total_tok_s": "total tok/s", "qps": "req/s"}


def _rate(value: float) -> str:
    """A rate the way a person reads it: 2 decimals under 10, whole numbers above."""
    return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.0f}"


def _times(ratio: float, bound: float | None = None) -> str:
    """2.753 → "2.8", 9.0 → "9": one decimal is all a ratio needs, unless its noise bound is shown
    beside it (to two decimals): then two, or "is 2.6×, at least 2.65×" reads as a contradiction."""
    if bound is not None:
        return f"{ratio:.2f}"
    return f"{ratio:.1f}".rstrip("0").rstrip(".")


def throughput_signals(
    row: pd.Series, prev: pd.Series | None, ctx: StageContext
) -> tuple[Signal, Signal]:
    """Flattening fires only when it clears the noise: the gain's upper bound (both stages'
    95 % intervals, independent, added in quadrature) is below ``flat_gain_ratio``. Without
    intervals (a typed-in table) the point figure decides."""
    p, col = ctx.params, ctx.params.throughput_column
    unit = RATE_UNITS.get(col, col)
    gain: float | None = None
    upper: float | None = None
    text = "no earlier stage to compare with"
    if prev is not None and ctx.x1:
        x, x_prev = num(row[col]), num(prev[col])
        dc = float(row["target_users"]) - float(prev["target_users"])
        if x is not None and x_prev is not None and dc > 0:
            gain = (x - x_prev) / dc / ctx.x1
            share = round(gain * 100) or 0  # never "-0 %"
            more = "added" if x >= x_prev else "lost"
            text = (
                f"{int(prev['target_users'])} → {int(row['target_users'])} users {more} "
                f"{_rate(abs(x - x_prev))} {unit} in all ({_rate(x_prev)} → {_rate(x)}), "
                f"{_rate((x - x_prev) / dc)} {unit} per added user = {share} % of the "
                f"{_rate(ctx.x1)} {unit} one user gets alone"
            )
            hw, hw_prev = half_width(row, col), half_width(prev, col)
            if p.noise_aware and hw is not None and hw_prev is not None:
                upper = gain + math.hypot(hw, hw_prev) / dc / ctx.x1
                text += f", at most {upper:.2f}× within the noise"
    decisive = upper if upper is not None else gain
    flat = Signal(
        "throughput_flattening",
        decisive is not None and decisive < p.flat_gain_ratio,
        gain,
        p.flat_gain_ratio,
        f"{text}: throughput has flattened (flat below {p.flat_gain_ratio * 100:g} %)"
        if gain is not None and gain < p.flat_gain_ratio
        else f"{text} (flat below {p.flat_gain_ratio * 100:g} %)",
    )
    narrowing = Signal(
        "gain_narrowing",
        gain is not None and gain < p.narrowing_gain_ratio,
        gain,
        p.narrowing_gain_ratio,
        f"{text}: the gain is narrowing (below {p.narrowing_gain_ratio * 100:g} %)"
        if gain is not None and gain < p.narrowing_gain_ratio
        else f"{text} (narrowing below {p.narrowing_gain_ratio * 100:g} %)",
    )
    return flat, narrowing


#: what a stage says when its tail's point figure is past the limit but its noise reaches below
TAIL_UNDECIDED = "cannot tell whether the tail has departed"


def tail_undecided(tail: Signal) -> bool:
    """The tail signal's point figure is at or past its limit, but it did not fire.

    It fires on the lower bound of the figure's interval, so this is the case where noise
    reaches below the limit: the stage shows neither a departed tail nor a held one, and says
    so. A busy machine widens the interval until a tail that has truly left the single-user one
    (an 8-slot server at 16 users) cannot be told from noise, and silence would read as "held".
    """
    return _undecided(tail.fired, tail.value, tail.threshold)


def _undecided(fired: bool, ratio: float | None, limit: float | None) -> bool:
    return not fired and ratio is not None and limit is not None and ratio >= limit


def tail_signals(row: pd.Series, ctx: StageContext) -> tuple[Signal, Signal | None]:
    """Tail departure fires only when the tail's lower bound (its 95 % interval, from
    resampling time windows) is at or above ``tail_ratio`` × the baseline's tail; without an
    interval the point figure decides."""
    p = ctx.params
    name = ctx.tail_percentile.upper()
    if p.tail_metric == "s_per_1k":
        tail = num(row.get(f"s_per_1k_total_{ctx.tail_percentile}"))
        what, unit = "seconds per 1k tokens", " s"
    else:
        tail, what, unit = num(row[f"e2e_{ctx.tail_percentile}_ms"]), "e2e", " ms"
    ratio = tail / ctx.base_tail_ms if tail is not None and ctx.base_tail_ms else None
    e2e = num(row.get(f"e2e_{ctx.tail_percentile}_ms"))
    e2e_low = num(row.get(f"e2e_{ctx.tail_percentile}_low_ms"))
    lower = None
    if p.noise_aware and ratio is not None and e2e and e2e_low is not None:
        lower = ratio * e2e_low / e2e  # the e2e interval's relative width, on either metric
    decisive = lower if lower is not None else ratio
    bound = f", at least {lower:.2f}× within the noise" if lower is not None else ""
    fired = decisive is not None and decisive >= p.tail_ratio
    undecided = _undecided(fired, ratio, p.tail_ratio)
    times = _times(ratio, lower) if ratio is not None and (fired or undecided) else fmt(ratio)
    if fired:
        verdict = f": the tail has departed (at {p.tail_ratio:g}× or more)"
    elif undecided:
        verdict = f": {TAIL_UNDECIDED} (departs at {p.tail_ratio:g}×)"
    else:
        verdict = f" (departs at {p.tail_ratio:g}×)"
    departed = Signal(
        "tail_departure",
        fired,
        ratio,
        p.tail_ratio,
        f"{name} {what} {fmt(tail, unit)} is {times}× {ctx.tail_source} "
        f"{fmt(ctx.base_tail_ms, unit)}{bound}{verdict}",
    )
    tail = num(row[f"e2e_{ctx.tail_percentile}_ms"])  # the SLA is on latency
    sla = None
    if p.sla_ms is not None:
        sla = Signal(
            "sla",
            tail is not None and tail > p.sla_ms,
            tail,
            p.sla_ms,
            f"{name} e2e {fmt(tail, ' ms')} against the SLA of {p.sla_ms:g} ms",
        )
    return departed, sla


def memory_signals(
    row: pd.Series, prev: pd.Series | None, ctx: StageContext
) -> tuple[Signal, Signal, Signal]:
    p = ctx.params
    mem, what = _memory_pct(row, ctx)
    gpu = num(row.get("gpu_mem_peak_pct"))
    text = f"{what} peak {fmt(mem, ' %')}"
    pressure = Signal(
        "memory_pressure",
        mem is not None and mem >= p.memory_pressure_pct,
        mem,
        p.memory_pressure_pct,
        f"{text} (pressure at {p.memory_pressure_pct:g} %)",
    )
    risk = Signal(
        "oom_risk",
        mem is not None and mem >= p.oom_risk_pct,
        mem,
        p.oom_risk_pct,
        f"{text}: at or above {p.oom_risk_pct:g} % the next stage risks OOM",
    )
    failing = int(row["errors"]) > 0
    oom = Signal(
        "oom",
        gpu is not None and gpu >= p.oom_pct and failing,
        gpu,
        p.oom_pct,
        f"GPU memory peak {fmt(gpu, ' %')} with {int(row['errors'])} failed requests "
        f"(OOM at {p.oom_pct:g} % with failures)",
    )
    before = num(prev.get("gpu_mem_peak_pct")) if prev is not None else None
    if (
        not oom.fired
        and failing
        and gpu is not None
        and before is not None
        and before >= p.memory_pressure_pct
        and gpu < before / 2
    ):
        oom = Signal(
            "oom",
            True,
            gpu,
            p.oom_pct,
            f"GPU memory fell from {fmt(before, ' %')} to a peak of {fmt(gpu, ' %')} while "
            f"{int(row['errors'])} requests failed: the server process died (OOM crash?)",
        )
    return pressure, risk, oom


def error_signals(row: pd.Series, ctx: StageContext) -> tuple[Signal, Signal]:
    p = ctx.params
    success = num(row["success_pct"])
    error_pct = None if success is None else 100.0 - success
    errors, served = int(row["errors"]), int(row["ok"]) + int(row["errors"])
    text = f"success {fmt(success, ' %')} ({errors} of {served} failed)"
    some = Signal("errors", int(row["errors"]) > 0, error_pct, 0.0, text)
    if stage_refuses(int(num(row.get("refused")) or 0), errors, int(row["ok"])):
        # the server's admission limit: past the capacity at any share (refusals.py)
        return some, refusal_signal(errors, served, error_pct)
    red = Signal(
        "error_rate",
        error_pct is not None and error_pct > p.red_line_error_pct,
        error_pct,
        p.red_line_error_pct,
        f"{text}; red line above {p.red_line_error_pct:g} % errors",
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
        f"load-generator CPU peak {fmt(cpu, ' %')} of a core (client-bound at {limit:g} %)",
    )


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
    persists on average is the slots being full."""
    p = ctx.params
    running, waiting = num(row.get("running_mean")), num(row.get("waiting_mean"))
    slots = ctx.server_slots
    if running is None or waiting is None or not slots:
        return Signal("server_saturated", False, None, None, "the server reports no queue")
    peak = num(row.get("running_max"))
    peak = running if peak is None else max(peak, running)
    batch = num(row.get("batch_size")) or 1.0
    in_flight = float(row["target_users"]) * batch
    # with no more requests in flight than the server ever ran, a waiting request is only
    # between scheduler steps (16 users on 16 slots showed 1.2 waiting on average)
    fired = (
        in_flight > slots
        and waiting >= p.saturated_waiting
        and peak >= p.saturated_running_share * slots
    )
    return Signal(
        "server_saturated",
        fired,
        waiting,
        p.saturated_waiting,
        f"the server ran {running:.1f} requests on average, {peak:g} at most (its most in "
        f"any stage: {slots:g}) while "
        f"{waiting:.1f} waited with {in_flight:g} in flight (saturated: more in flight than its "
        f"most, {p.saturated_waiting:g} or more waiting, "
        f"{p.saturated_running_share * 100:.0f} % of the most reached) {rules.cite('saturation')}",
    )


def free_slots_signal(row: pd.Series, ctx: StageContext) -> Signal:
    """The server's own word the other way: nothing waited and slots were free.

    Fires when the server reports its queue, a stage had no more requests in flight (users ×
    batch) than the server's running maximum (``server_slots``), and its mean waiting count
    stayed below ``saturated_waiting``: every added user was admitted at once, so the stage is
    not saturated. :func:`analysis.knee.find.find_knee` lets this overrule a flattening seen by the
    client only where the client's figure is untrusted (no interval, or one too wide) and some
    stage proved the running maximum is a real limit (requests waited there)."""
    p = ctx.params
    running, waiting = num(row.get("running_mean")), num(row.get("waiting_mean"))
    slots = ctx.server_slots
    if running is None or waiting is None or not slots:
        return Signal("server_free_slots", False, None, None, "the server reports no queue")
    batch = num(row.get("batch_size")) or 1.0
    in_flight = float(row["target_users"]) * batch
    fired = in_flight <= slots and waiting < p.saturated_waiting
    return Signal(
        "server_free_slots",
        fired,
        waiting,
        p.saturated_waiting,
        f"the server's own counts: {running:.1f} requests running on average of the "
        f"{slots:g} it ran at most, {waiting:.1f} waiting, with {in_flight:g} in flight: "
        "every request was admitted at once, not saturated",
    )


def noise_signal(row: pd.Series, ctx: StageContext) -> Signal:
    """Whether the stage is too noisy (or too short) to judge: its throughput interval wider
    than ``max_interval_pct``, or no interval from a stage that has raw rows."""
    p = ctx.params
    batches, pct = num(row.get("interval_batches")), num(row.get("output_tok_s_hw_pct"))
    need = num(row.get("window_needed_s"))
    target = p.target_interval_pct
    need_text = (
        f"; a stage would need ~{need:,.0f} s to reach ±{target:g} %" if need is not None else ""
    )
    if batches is None:  # no raw rows behind this table: nothing to judge the noise by
        return Signal("noisy", False, None, p.max_interval_pct, "no interval computed")
    if batches == 0 or pct is None:
        window = num(row.get("window_s"))
        return Signal(
            "noisy",
            int(row["ok"]) > 0,
            None,
            p.max_interval_pct,
            f"untrusted: the {fmt(window, ' s')} window is too short for an interval "
            f"(fewer than 5 time windows one request long){need_text} {rules.cite('noisy')}",
        )
    return Signal(
        "noisy",
        pct > p.max_interval_pct,
        pct,
        p.max_interval_pct,
        f"untrusted: throughput ±{pct:.0f} %{need_text} {rules.cite('noisy')}"
        if pct > p.max_interval_pct
        else f"throughput ±{pct:.1f} % (95 %, {int(batches)} time windows)",
    )
