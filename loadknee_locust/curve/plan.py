"""A log's in-flight curve as a replay plan: users(t) × scale, in time windows (stdlib, no clock).

The closed-loop curve replay (``--llm-replay-curve LOG``) turns a log into the users a
``LoadTestShape`` asks for at each tick. The steps, for the records of
:func:`~loadknee_core.traces.read_trace` (any order):

1. **Durations.** A record's logged end or duration is used as is; without one the record lasts
   ``latency_s`` (Little's law: in flight = arrival rate × latency). A log with neither is
   refused with a message that names the flag.
2. **Bins.** The log's time axis is cut into bins ``time_scale`` log seconds wide: one second of
   the replay each. Each request adds its overlap with every bin it spans, so a bin holds the
   time-weighted mean number in flight (area ÷ width). Order does not matter (sums commute) and
   memory is one float per bin, whatever the number of records.
3. **Windows.** The replay's stages are windows of ``window_s`` replay seconds (``window_s``
   bins); each scale in ``scales`` replays every window once, in order, back to back. A
   window's ``target_users`` (its stage's users in ``stages.csv``, the concurrency the knee
   analysis reads) is its bins' mean × scale, rounded, at least 1.
4. **Users.** At replay second ``k`` of a window the shape asks for ``round(scale × bin)``
   users; 0 is allowed (a quiet hour).

The records' start times and lengths are kept (:class:`LengthIndex`, three compact arrays) so
that each user can send a request drawn from the log around the replayed time: only lengths,
never text.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

from loadknee_core.traces import TraceRecord

#: the most bins a replay plan holds (about 12 days of log at a time scale of 1)
MAX_BINS = 1_000_000


@dataclass(frozen=True)
class Window:
    """One stage of the replay: a ``scale`` and a span of log time."""

    index: int  # the stage index in stages.csv
    scale: float
    log_start_s: float
    log_end_s: float
    first_bin: int
    bins: int
    target_users: int  # round(mean in flight × scale), >= 1
    mean_users: float  # mean in flight × scale, unrounded

    def as_dict(self) -> dict[str, float | int]:
        return {
            "stage": self.index,
            "scale": self.scale,
            "log_start_s": self.log_start_s,
            "log_end_s": self.log_end_s,
            "target_users": self.target_users,
            "curve_mean_users": round(self.mean_users, 4),
        }


class LengthIndex:
    """Each record's start (log seconds) and lengths, sorted by start; -1 = length not logged."""

    def __init__(self, records: list[tuple[float, int, int]]) -> None:
        records.sort()
        self.starts = array("d", (r[0] for r in records))
        self.inputs = array("l", (r[1] for r in records))
        self.outputs = array("l", (r[2] for r in records))

    def __len__(self) -> int:
        return len(self.starts)

    def first_at(self, t: float) -> int:
        """Index of the first record starting at or after ``t``."""
        return bisect.bisect_left(self.starts, t)


@dataclass(frozen=True)
class CurvePlan:
    """The replay: its bins (mean in flight per replay second) and its windows over the scales."""

    origin_s: float  # log time of bin 0
    time_scale: float  # log seconds per replay second
    window_s: float  # replay seconds per window
    scales: tuple[float, ...]
    curve: tuple[float, ...]  # mean in flight per bin (scale 1)
    windows: tuple[Window, ...]
    duration_source: str  # "logged", "latency" or "mixed"
    requests: int

    @property
    def pass_s(self) -> float:
        """Replay seconds of one pass over the log (one scale)."""
        return len(self.curve) * 1.0

    def pass_of(self, stage: int) -> int:
        """Which scale (0, 1, …) stage ``stage`` replays."""
        return stage // max(1, len(self.windows) // len(self.scales))

    def users_at(self, stage: int, offset_s: float) -> int:
        """Users ``offset_s`` replay seconds into stage ``stage``'s window (clamped to it)."""
        w = self.windows[min(max(stage, 0), len(self.windows) - 1)]
        k = w.first_bin + min(max(int(offset_s), 0), w.bins - 1)
        return max(0, round(self.curve[k] * w.scale))

    def log_time(self, stage: int, offset_s: float) -> float:
        """The log time replayed ``offset_s`` seconds into stage ``stage`` (within its window)."""
        w = self.windows[stage]
        return w.log_start_s + min(max(0.0, offset_s), float(w.bins)) * self.time_scale

    def info(self) -> dict[str, object]:
        """For run.json: how the replay was made and each window's log span and users."""
        peak = max(self.curve, default=0.0)
        return {
            "time_scale": self.time_scale,
            "window_s": self.window_s,
            "scales": list(self.scales),
            "log_origin_s": self.origin_s,
            "log_span_s": len(self.curve) * self.time_scale,
            "requests": self.requests,
            "duration_source": self.duration_source,
            "curve_peak_users": round(peak, 4),
            "windows": [w.as_dict() for w in self.windows],
        }


@dataclass(frozen=True)
class PlanParams:
    time_scale: float = 60.0
    window_s: float = 30.0
    scales: tuple[float, ...] = (1.0,)
    latency_s: float | None = None

    def __post_init__(self) -> None:
        if not (self.time_scale > 0 and math.isfinite(self.time_scale)):
            raise ValueError("--llm-time-scale must be a number > 0")
        if not self.window_s >= 1 or self.window_s != int(self.window_s):
            raise ValueError("--llm-curve-window-seconds must be a whole number >= 1")
        if not self.scales or any(not (s > 0 and math.isfinite(s)) for s in self.scales):
            raise ValueError("--llm-curve-scales must be numbers > 0, e.g. 1,1.5,2")
        if self.latency_s is not None and not self.latency_s > 0:
            raise ValueError("--llm-curve-latency-seconds must be > 0")


def parse_scales(text: str) -> tuple[float, ...]:
    """``"1,1.5,2"`` → ``(1.0, 1.5, 2.0)``; ValueError on anything else."""
    try:
        values = tuple(float(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise ValueError(f"--llm-curve-scales must be numbers, got {text!r}") from None
    PlanParams(scales=values)  # checks them
    return values


def _spans(
    records: Iterable[TraceRecord], latency_s: float | None
) -> tuple[list[tuple[float, float]], list[tuple[float, int, int]], str]:
    spans: list[tuple[float, float]] = []
    lengths: list[tuple[float, int, int]] = []
    logged = modelled = 0
    for r in records:
        n_in = -1 if r.input_tokens is None else r.input_tokens
        n_out = -1 if r.output_tokens is None else r.output_tokens
        lengths.append((r.start_s, n_in, n_out))
        if r.duration_s is not None:
            spans.append((r.start_s, r.start_s + r.duration_s))
            logged += 1
        elif latency_s is not None:
            spans.append((r.start_s, r.start_s + latency_s))
            modelled += 1
    if not lengths:
        raise ValueError("the log has no record with a readable time")
    if not spans:
        raise ValueError(
            "the log has no end or duration for its requests: give --llm-curve-latency-seconds "
            "(each request's latency, for Little's law)"
        )
    source = "latency" if not logged else "logged" if not modelled else "mixed"
    return spans, lengths, source


def build_plan(records: Iterable[TraceRecord], params: PlanParams) -> tuple[CurvePlan, LengthIndex]:
    """The replay plan and the length index of ``records`` (see the module docstring)."""
    spans, lengths, source = _spans(records, params.latency_s)
    origin = min(s for s, _ in spans)
    end = max(e for _, e in spans)
    width = params.time_scale
    n_bins = max(1, math.ceil((end - origin) / width))
    if n_bins > MAX_BINS:
        raise ValueError(
            f"the log spans {end - origin:.0f} s: {n_bins} replay seconds at --llm-time-scale "
            f"{width:g}; raise the time scale (at most {MAX_BINS} seconds)"
        )
    area = [0.0] * n_bins
    for start, stop in spans:
        a, b = (start - origin) / width, (stop - origin) / width
        i = min(int(a), n_bins - 1)
        while a < b and i < n_bins:
            hi = min(b, i + 1.0)
            area[i] += hi - a
            a, i = hi, i + 1
    curve = tuple(area)  # bin width 1 in bin units: area is the mean in flight
    per = int(params.window_s)
    windows: list[Window] = []
    for scale in params.scales:
        for first in range(0, n_bins, per):
            bins = min(per, n_bins - first)
            mean = sum(curve[first : first + bins]) / bins * scale
            windows.append(
                Window(
                    index=len(windows),
                    scale=scale,
                    log_start_s=origin + first * width,
                    log_end_s=origin + (first + bins) * width,
                    first_bin=first,
                    bins=bins,
                    target_users=max(1, round(mean)),
                    mean_users=mean,
                )
            )
    plan = CurvePlan(
        origin, width, float(per), params.scales, curve, tuple(windows), source, len(lengths)
    )
    return plan, LengthIndex(lengths)
