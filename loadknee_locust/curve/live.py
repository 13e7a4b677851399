"""The curve replay as it runs: the log's curve beside the measured in-flight count, per second.

:class:`InflightTrack` holds, for every second of the replay (every scale, after the lead-in),
the users the plan asks for (the log's mean in flight × the window's scale) and the measured
mean number of requests in flight: each completed row adds its overlap with every second it
spans (the same area sum as :mod:`loadknee_locust.curve.plan`). A request is counted when it
completes, so the last seconds fill in as their requests end: :meth:`InflightTrack.points`
shows the measured line only up to the longest request seen so far before the latest end. The
web UI's live tab draws both lines (:func:`loadknee_locust.webui.liveview.curve_chart`); memory
is two floats per replay second.
"""

from __future__ import annotations

from loadknee_locust.curve.plan import CurvePlan

#: at most this many points per line in the chart
MAX_POINTS = 300


class InflightTrack:
    """Target and measured in flight per replay second, from ``replay_start_unix_s``."""

    def __init__(self, plan: CurvePlan, replay_start_unix_s: float) -> None:
        self.start = replay_start_unix_s
        self.target: list[float] = []
        for w in plan.windows:
            self.target.extend(plan.curve[w.first_bin + j] * w.scale for j in range(w.bins))
        self.area = [0.0] * len(self.target)
        self.latest_end = replay_start_unix_s
        self.longest_s = 0.0

    def add(self, start: float, end: float) -> None:
        """One completed request (unix seconds)."""
        if end <= start:
            return
        self.latest_end = max(self.latest_end, end)
        self.longest_s = max(self.longest_s, end - start)
        n = len(self.area)
        a, b = start - self.start, end - self.start
        i = max(0, int(a)) if a >= 0 else 0
        a = max(a, 0.0)
        while a < b and i < n:
            hi = min(b, i + 1.0)
            self.area[i] += hi - a
            a, i = hi, i + 1

    def points(
        self,
    ) -> tuple[tuple[tuple[float, float | None], ...], tuple[tuple[float, float | None], ...]]:
        """(target, measured) as (replay second, in flight) points, thinned to MAX_POINTS."""
        step = max(1, len(self.target) // MAX_POINTS)
        known = int(self.latest_end - self.longest_s - self.start)
        target = tuple((float(k), self.target[k]) for k in range(0, len(self.target), step))
        measured = tuple(
            (float(k), sum(self.area[k : k + step]) / len(self.area[k : k + step]))
            for k in range(0, min(max(known, 0), len(self.area)), step)
        )
        return target, measured
