"""The knee's signals: each rule of :mod:`analysis.knee` evaluated on one stage, with its numbers.

Each function takes one summary row (and the previous served stage where the rule compares two)
plus the :class:`StageContext` every stage is compared against, and returns
:class:`~analysis.model.Signal` objects whose ``text`` says, in words and numbers, what was
measured against which threshold. :func:`analysis.knee.evaluate_stage` turns them into a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from analysis.model import Signal
from analysis.numeric import fmt, num

if TYPE_CHECKING:
    from analysis.knee import KneeParams


@dataclass(frozen=True)
class StageContext:
    """What every stage is compared against."""

    x1: float | None  # single-user throughput
    base_tail_ms: float | None  # the baseline's tail figure (ms, or s per 1k tokens)
    tail_percentile: str  # the one used: the asked one, or the other when the baseline lacks it
    gpu_flat: bool  # GPU memory the same at every stage: pre-allocated, says nothing
    params: KneeParams


def _memory_pct(row: pd.Series, ctx: StageContext) -> tuple[float | None, str]:
    kv, gpu = num(row.get("kv_cache_peak_pct")), num(row.get("gpu_mem_peak_pct"))
    source = ctx.params.memory_source
    if source == "kv_cache":
        return kv, "KV-cache"
    if source == "gpu" or kv is None:
        return gpu, "GPU memory"
    if gpu is None or ctx.gpu_flat:
        return kv, "KV-cache"
    return (kv, "KV-cache") if kv >= gpu else (gpu, "GPU memory")


#: how a throughput column is named in a sentence
RATE_UNITS = {"output_tok_s": "tok/s", "total_tok_s": "total tok/s", "qps": "req/s"}


def _rate(value: float) -> str:
    """A rate the way a person reads it: 2 decimals under 10, whole numbers above."""
    return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.0f}"


def _times(ratio: float) -> str:
    """2.753 → "2.8", 9.0 → "9": one decimal is all a ratio needs."""
    return f"{ratio:.1f}".rstrip("0").rstrip(".")


def throughput_signals(
    row: pd.Series, prev: pd.Series | None, ctx: StageContext
) -> tuple[Signal, Signal]:
    p, col = ctx.params, ctx.params.throughput_column
    unit = RATE_UNITS.get(col, col)
    gain: float | None = None
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
    flat = Signal(
        "throughput_flattening",
        gain is not None and gain < p.flat_gain_ratio,
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


def tail_signals(row: pd.Series, ctx: StageContext) -> tuple[Signal, Signal | None]:
    p = ctx.params
    name = ctx.tail_percentile.upper()
    if p.tail_metric == "s_per_1k":
        tail = num(row.get(f"s_per_1k_total_{ctx.tail_percentile}"))
        what, unit = "seconds per 1k tokens", " s"
    else:
        tail, what, unit = num(row[f"e2e_{ctx.tail_percentile}_ms"]), "e2e", " ms"
    ratio = tail / ctx.base_tail_ms if tail is not None and ctx.base_tail_ms else None
    departed = Signal(
        "tail_departure",
        ratio is not None and ratio >= p.tail_ratio,
        ratio,
        p.tail_ratio,
        f"{name} {what} {fmt(tail, unit)} is {_times(ratio)}× the baseline's "
        f"{fmt(ctx.base_tail_ms, unit)}: the tail has departed (at {p.tail_ratio:g}× or more)"
        if ratio is not None and ratio >= p.tail_ratio
        else f"{name} {what} {fmt(tail, unit)} is {fmt(ratio)}× the baseline's "
        f"{fmt(ctx.base_tail_ms, unit)} (departs at {p.tail_ratio:g}×)",
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
