"""A traffic shape as a short terminal table and as JSON (lengths and times only, never text)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, tzinfo
from typing import Any

from analysis.traffic.headroom import Capacity, Headroom
from analysis.traffic.shape import Dist, TrafficShape
from loadknee_core.traces import TraceRead

EPOCH_FROM_S = 1e8  # a start this large is a unix time (1973 on); smaller ones are relative


def is_absolute(shape: TrafficShape) -> bool:
    return shape.first_start_s is not None and shape.first_start_s >= EPOCH_FROM_S


def clock(shape: TrafficShape, t: float | None, tz: tzinfo | None) -> str:
    """A time of the log: its clock time (in ``tz``, None: local) or seconds from its start."""
    if t is None:
        return "—"
    if is_absolute(shape):
        return datetime.fromtimestamp(t, tz).astimezone(tz).strftime("%Y-%m-%d %H:%M:%S %Z").strip()
    return f"{t - (shape.first_start_s or 0.0):.1f} s in"


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes = seconds / 60
    return f"{minutes:.1f} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def _dist(d: Dist | None, unit: str = "", scale: float = 1.0) -> str:
    if d is None:
        return "not in the log"
    v = [_num(x * scale) for x in (d.mean, d.p50, d.p95, d.max)]
    return f"mean {v[0]}{unit}, P50 {v[1]}{unit}, P95 {v[2]}{unit}, max {v[3]}{unit}"


def _num(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _inflight(shape: TrafficShape, tz: tzinfo | None) -> str:
    d = shape.inflight
    if d is None:
        return (
            "no end times or durations in the log: give --latency-seconds S or --against RUN_DIR "
            "(Little's law)"
        )
    source = {
        "logged": "logged durations",
        "latency": f"Little's law, latency of {shape.latency_source}",
        "mixed": f"logged durations, Little's law for the rest ({shape.latency_source})",
    }[shape.inflight_source]
    text = f"median {d.p50:g}, P95 {d.p95:g}, peak {d.max:g} at {clock(shape, shape.peak_at_s, tz)}"
    text += f" ({source})"
    if shape.without_duration:
        text += f"; {shape.without_duration} request(s) without a duration left out"
    return text


@dataclass(frozen=True)
class TraceReading:
    """What ``loadknee trace`` found, as both renderers take it: the log as read and its shape;
    against a run, the run's capacity and the headroom the shape leaves under it."""

    shape: TrafficShape
    read: TraceRead
    room: Headroom | None = None
    capacity: Capacity | None = None


def text_lines(reading: TraceReading, *, tz: tzinfo | None = None) -> list[str]:
    """The terminal table: a few lines, numbers with their units."""
    shape, read, room, capacity = reading.shape, reading.read, reading.room, reading.capacity
    lines = [f"trace  {read.summary()}"]
    if read.failed:
        lines.append(f"       {read.failed} failed requests (0 response tokens): arrivals only")
    if note := shape.order.text():
        lines.append(f"order  {note}")
    if not shape.requests:
        return [*lines, "no request with a readable time"]
    rate = shape.mean_rate_per_s
    cv = shape.interarrival_cv
    lines += [
        f"span         {_span(shape.span_s)} "
        + (
            f"from {clock(shape, shape.first_start_s, tz)}"
            if is_absolute(shape)
            else "(times relative to the trace's start)"
        )
        + f", bins of {shape.bin_s:g} s",
        f"arrivals     mean {rate:.3g}/s" if rate is not None else "arrivals     —",
    ]
    if shape.peak_rate_per_s is not None:
        lines[-1] += f", peak {shape.peak_rate_per_s:.3g}/s (in {shape.bin_s:g} s)"
    if cv is not None:
        lines[-1] += f", burstiness CV {cv:.2f} (Poisson 1, steady 0)"
    lines += [
        f"in flight    {_inflight(shape, tz)}",
        f"input tok    {_dist(shape.input_tokens)}",
        f"output tok   {_dist(shape.output_tokens)}",
    ]
    if shape.duration_ms is not None:
        lines.append(f"duration     {_dist(shape.duration_ms, ' s', 1e-3)}")
    if room is not None:
        lines.append(f"headroom     {room.text}")
        if room.breaks_at_s is not None:
            lines.append(f"             first past it at {clock(shape, room.breaks_at_s, tz)}")
    elif capacity is not None:
        lines.append(f"headroom     cannot tell: {capacity.text}" if capacity.users is None else
                     "headroom     cannot tell without an in-flight curve")  # fmt: skip
    return lines


def to_json(reading: TraceReading) -> dict[str, Any]:
    """Everything measured, curves included; times are the log's (unix or relative seconds)."""
    shape, read, room, capacity = reading.shape, reading.read, reading.room, reading.capacity
    out: dict[str, Any] = {
        "log": {
            "file": read.path.rsplit("/", 1)[-1],
            "format": read.format,
            "records": read.records,
            "used": read.used,
            "bad_records": read.bad_count,
            "bad_lines": [{"line": n, "reason": r} for n, r in read.bad_samples],
            "failed_requests": read.failed,
        },
        "absolute_times": is_absolute(shape),
    }
    summary = asdict(shape)
    curves = {k: summary.pop(k) for k in ("arrivals", "inflight_mean", "inflight_max")}
    out["shape"] = summary
    out["order_message"] = shape.order.text()
    out["curves"] = {"bin_s": shape.bin_s, "t0_s": shape.first_start_s, **curves}
    out["capacity"] = asdict(capacity) if capacity is not None else None
    out["headroom"] = asdict(room) if room is not None else None
    return out
