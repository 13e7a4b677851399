"""The shape of logged traffic in one streaming pass: arrivals, in-flight concurrency, lengths.

The algorithm, for records read in file order (:func:`~loadknee_core.traces.read_trace`):

1. **Order.** Records pass through a reorder buffer ``reorder_s`` seconds long (a heap on start
   time): a record that starts earlier than one before it in the file is put back in its place
   while it is less than ``reorder_s`` behind the latest start; one that is further behind (its
   time is before starts already placed) is *left out* of the time curves (its lengths still
   count). Both kinds are counted and their line numbers kept for one message.
2. **Sweep.** In start order, each request's end (start + duration) goes on a heap; before each
   start the ends at or before it are taken off. The number in flight is the heap's size, exact
   at every instant; its peak is reached at a start. Memory is the number in flight, not the
   number of records.
3. **Durations.** A logged end or duration is used as is; without one the record's duration is
   the ``latency`` model's (Little's law: the in-flight count averages arrival rate × latency).
   A record with neither counts as an arrival only and is counted in ``without_duration``.
4. **Time weights.** Between two events the in-flight count is constant: its time-weighted
   distribution (level → seconds, from the first start to the last end) gives the median, P95
   and peak. Per time bin the curve keeps the mean (area / bin width) and the maximum.
5. **Bins.** Bins start ``bin_s`` wide at the first start; when there would be more than
   ``max_bins`` the bins are merged in pairs (their width doubles), so memory stays bounded
   whatever the trace's span.
6. **Burstiness.** The coefficient of variation (std / mean, Welford) of the gaps between
   consecutive starts: 1 for Poisson arrivals, above 1 for bursts, 0 for a fixed rate.
7. **Lengths.** Token counts (and logged durations, in ms) are tallied in counters: exact
   percentiles in memory bounded by the number of distinct values.

Parameters (:class:`ShapeParams`): ``bin_s`` 1.0 s, ``max_bins`` 2048, ``reorder_s`` 60 s,
``latency`` None.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from loadknee_core.traces import TraceRecord

MAX_LINE_SAMPLES = 10


@dataclass(frozen=True)
class LatencyModel:
    """A request's latency when the log has none: ``ttft_s + output × tpot_s``, else ``mean_s``."""

    mean_s: float
    source: str  # where the figures come from, in words
    ttft_s: float | None = None
    tpot_s: float | None = None

    def duration_s(self, output_tokens: int | None) -> float:
        if output_tokens is not None and self.ttft_s is not None and self.tpot_s is not None:
            return self.ttft_s + output_tokens * self.tpot_s
        return self.mean_s


@dataclass(frozen=True)
class ShapeParams:
    bin_s: float = 1.0
    max_bins: int = 2048
    reorder_s: float = 60.0
    latency: LatencyModel | None = None

    def __post_init__(self) -> None:
        if not self.bin_s > 0 or self.max_bins < 2 or self.reorder_s < 0:
            raise ValueError("bin_s must be > 0, max_bins >= 2 and reorder_s >= 0")


@dataclass(frozen=True)
class Dist:
    """Percentiles of a tally; values in the tally's unit."""

    count: int
    mean: float
    p50: float
    p95: float
    max: float


@dataclass(frozen=True)
class OrderReport:
    """Records out of file order: how many were put back in place, how many left out."""

    unordered: int = 0
    unordered_lines: tuple[int, ...] = ()
    left_out: int = 0
    left_out_lines: tuple[int, ...] = ()
    reorder_s: float = 0.0
    ahead_line: int | None = None  # the latest start when the first record was left out

    def text(self) -> str:
        """One message, "" when every record was in order."""
        if not self.unordered:
            return ""
        lines = ", ".join(map(str, self.unordered_lines))
        more = "" if self.unordered <= len(self.unordered_lines) else ", …"
        text = (
            f"{self.unordered} record(s) start before the one above them (lines {lines}{more}); "
            f"put back in time order where they were less than {self.reorder_s:g} s behind the "
            "latest start"
        )
        if self.left_out:
            shown = ", ".join(map(str, self.left_out_lines))
            more = "" if self.left_out <= len(self.left_out_lines) else ", …"
            text += (
                f"; {self.left_out} further behind (lines {shown}{more}), earlier than starts "
                "already placed, are left out of the time curves, their lengths kept"
            )
            if self.ahead_line is not None:
                text += f" (the latest start then was line {self.ahead_line}'s: is its time right?)"
        return text


@dataclass(frozen=True)
class TrafficShape:
    """Everything :func:`traffic_shape` measures; None where the log cannot say."""

    requests: int  # records placed on the time axis
    first_start_s: float | None
    last_start_s: float | None
    span_s: float  # first start → last end (or last start without durations)
    bin_s: float
    arrivals: tuple[int, ...]  # starts per bin
    inflight_mean: tuple[float, ...] | None  # per bin
    inflight_max: tuple[int, ...] | None  # per bin
    inflight_source: str  # "logged", "latency", "mixed" or "" (no curve)
    inflight: Dist | None  # time-weighted in-flight count
    peak_at_s: float | None  # start time at which the peak was first reached
    without_duration: int  # placed records with no duration and no latency model
    mean_rate_per_s: float | None
    peak_rate_per_s: float | None  # in one bin
    interarrival_cv: float | None
    interarrival_mean_s: float | None
    input_tokens: Dist | None
    output_tokens: Dist | None
    duration_ms: Dist | None  # logged durations only
    order: OrderReport = field(default_factory=OrderReport)
    latency_source: str = ""


def dist(tally: Counter[int] | dict[int, float]) -> Dist | None:
    """Exact weighted percentiles (the lowest value whose cumulative weight reaches q)."""
    total = sum(tally.values())
    if not tally or total <= 0:
        return None
    keys = sorted(tally)
    mean = sum(k * w for k, w in tally.items()) / total
    marks, found, acc = (0.5, 0.95), {}, 0.0
    for k in keys:
        acc += tally[k]
        for q in marks:
            if q not in found and acc >= q * total * (1 - 1e-12):
                found[q] = k
    return Dist(
        int(total) if isinstance(total, int) else len(keys), mean, found[0.5], found[0.95], keys[-1]
    )


class _Bins:
    """Per-bin arrivals, in-flight area and maximum; pairs merged when there would be too many."""

    def __init__(self, origin: float, width: float, cap: int) -> None:
        self.origin, self.width, self.cap = origin, width, cap
        self.count: list[int] = []
        self.area: list[float] = []
        self.peak: list[int] = []

    def index(self, t: float) -> int:
        i = int((t - self.origin) / self.width)
        if i < len(self.count):
            return i
        while i >= self.cap:
            self._merge()
            i = int((t - self.origin) / self.width)
        while len(self.count) <= i:
            self.count.append(0)
            self.area.append(0.0)
            self.peak.append(0)
        return i

    def _merge(self) -> None:
        def pairs(values: list, join) -> list:  # type: ignore[type-arg]
            return [join(values[k : k + 2]) for k in range(0, len(values), 2)]

        self.count = pairs(self.count, sum)
        self.area = pairs(self.area, sum)
        self.peak = pairs(self.peak, max)
        self.width *= 2

    def level(self, a: float, b: float, level: int) -> None:
        """``level`` requests in flight from ``a`` to ``b``."""
        i = int((a - self.origin) / self.width)
        if i < len(self.area) and b <= self.origin + (i + 1) * self.width:  # within one bin
            self.area[i] += level * (b - a)
            if level > self.peak[i]:
                self.peak[i] = level
            return
        j = self.index(b)  # first: it may merge the bins, which moves a's index
        i = self.index(a)
        for k in range(i, j + 1):
            lo = max(a, self.origin + k * self.width)
            hi = min(b, self.origin + (k + 1) * self.width)
            if hi > lo:
                self.area[k] += level * (hi - lo)
                if level > self.peak[k]:
                    self.peak[k] = level


def _start(item: tuple[float, int, float | None]) -> float:
    return item[0]


class _Builder:
    def __init__(self, params: ShapeParams) -> None:
        self.p = params
        # start order; an in-order record is appended, an unordered one inserted in place
        self.pending: deque[tuple[float, int, float | None]] = deque()
        self.max_seen = -math.inf
        self.max_line = 0
        self.ahead_line: int | None = None
        self.prev_file_start = -math.inf
        self.placed_until = -math.inf
        self.unordered: list[int] = []
        self.n_unordered = 0
        self.left_out: list[int] = []
        self.n_left_out = 0
        self.bins: _Bins | None = None
        self.ends: list[float] = []
        self.now = -math.inf
        self.level = 0
        self.weights: dict[int, float] = {}
        self.peak = 0
        self.peak_at: float | None = None
        self.first: float | None = None
        self.last: float | None = None
        self.n = 0
        self.gaps = 0
        self.gap_mean = 0.0
        self.gap_m2 = 0.0
        self.no_duration = 0
        self.logged = 0
        self.modelled = 0
        self.inputs: Counter[int] = Counter()
        self.outputs: Counter[int] = Counter()
        self.durations: Counter[int] = Counter()

    def add(self, r: TraceRecord) -> None:
        if r.input_tokens is not None:
            self.inputs[r.input_tokens] += 1
        if r.output_tokens is not None:
            self.outputs[r.output_tokens] += 1
        start, duration = r.start_s, r.duration_s
        if duration is not None:
            self.durations[round(duration * 1000)] += 1
            self.logged += 1
        elif self.p.latency is not None:
            duration = self.p.latency.duration_s(r.output_tokens)
            self.modelled += 1
        if start < self.prev_file_start:
            self.n_unordered += 1
            if len(self.unordered) < MAX_LINE_SAMPLES:
                self.unordered.append(r.line)
        self.prev_file_start = start
        if start < self.placed_until:
            if not self.n_left_out:
                self.ahead_line = self.max_line
            self.n_left_out += 1
            if len(self.left_out) < MAX_LINE_SAMPLES:
                self.left_out.append(r.line)
            return
        pending = self.pending
        if start >= self.max_seen:
            pending.append((start, r.line, duration))
            self.max_seen, self.max_line = start, r.line
        else:
            pending.insert(
                bisect.bisect_right(pending, start, key=_start), (start, r.line, duration)
            )
        horizon = self.max_seen - self.p.reorder_s
        while pending and pending[0][0] <= horizon:
            self._place(*pending.popleft())

    def _advance(self, t: float) -> None:
        if t > self.now:
            if self.now > -math.inf:
                self.weights[self.level] = self.weights.get(self.level, 0.0) + (t - self.now)
                if self.level and self.bins is not None:
                    self.bins.level(self.now, t, self.level)
            self.now = t

    def _place(self, start: float, _line: int, duration: float | None) -> None:
        self.placed_until = start
        if self.bins is None:
            self.bins = _Bins(start, self.p.bin_s, self.p.max_bins)
            self.first = start
        else:
            gap = start - (self.last if self.last is not None else start)
            self.gaps += 1
            delta = gap - self.gap_mean
            self.gap_mean += delta / self.gaps
            self.gap_m2 += delta * (gap - self.gap_mean)
        self.last = start
        self.n += 1
        ends = self.ends
        while ends and ends[0] <= start:
            self._advance(heapq.heappop(ends))
            self.level -= 1
        self._advance(start)
        i = self.bins.index(start)
        self.bins.count[i] += 1
        if duration is None:
            self.no_duration += 1
            return
        self.level += 1
        heapq.heappush(ends, start + duration)
        if self.level > self.bins.peak[i]:
            self.bins.peak[i] = self.level
        if self.level > self.peak:
            self.peak, self.peak_at = self.level, start

    def _mean_rate(self) -> float | None:
        if self.first is None or self.last is None or self.last <= self.first:
            return None
        return (self.n - 1) / (self.last - self.first)

    def finish(self) -> TrafficShape:
        while self.pending:
            self._place(*self.pending.popleft())
        while self.ends:
            self._advance(heapq.heappop(self.ends))
            self.level -= 1
        bins = self.bins
        order = OrderReport(
            self.n_unordered, tuple(self.unordered), self.n_left_out, tuple(self.left_out),
            self.p.reorder_s, self.ahead_line,
        )  # fmt: skip
        with_duration = self.n - self.no_duration
        has_curve = with_duration > 0
        source = (
            "" if not has_curve
            else "latency" if self.logged == 0
            else "logged" if self.modelled == 0
            else "mixed"
        )  # fmt: skip
        span = (self.now if has_curve else (self.last or 0.0)) - (self.first or 0.0)
        width = bins.width if bins else self.p.bin_s
        rates = [c / width for c in bins.count] if bins else []
        cv = None
        if self.gaps >= 2 and self.gap_mean > 0:
            cv = math.sqrt(self.gap_m2 / (self.gaps - 1)) / self.gap_mean
        latency = self.p.latency
        return TrafficShape(
            requests=self.n,
            first_start_s=self.first,
            last_start_s=self.last,
            span_s=max(span, 0.0),
            bin_s=width,
            arrivals=tuple(bins.count) if bins else (),
            inflight_mean=tuple(a / width for a in bins.area) if bins and has_curve else None,
            inflight_max=tuple(bins.peak) if bins and has_curve else None,
            inflight_source=source,
            inflight=dist(self.weights) if has_curve else None,
            peak_at_s=self.peak_at,
            without_duration=self.no_duration,
            mean_rate_per_s=self._mean_rate(),
            peak_rate_per_s=max(rates) if rates else None,
            interarrival_cv=cv,
            interarrival_mean_s=self.gap_mean if self.gaps else None,
            input_tokens=dist(self.inputs),
            output_tokens=dist(self.outputs),
            duration_ms=dist(self.durations),
            order=order,
            latency_source=latency.source if latency is not None and self.modelled else "",
        )


def traffic_shape(
    records: Iterable[TraceRecord], params: ShapeParams | None = None
) -> TrafficShape:
    """One pass over ``records`` (in file order) → their :class:`TrafficShape`."""
    builder = _Builder(params or ShapeParams())
    for record in records:
        builder.add(record)
    return builder.finish()
