"""Each worker's clock offset from the master's, measured from messages they exchange anyway.

Why correct the clocks rather than let the stage travel with the row: on separate hosts a worker
stamps ``start_unix_s`` with its own clock, and the master places rows into stages by that time
against its own stage windows, so a worker 1 s off puts requests into the wrong stage or phase
near every boundary. The other cure, labelling a row with the stage the worker believed it was in,
is late by the stage message's trip and the worker's busy hub (tens of ms at hundreds of streams),
knows nothing of the phase boundaries inside a stage (warm-up, measured window, count-based
windows that close later), and leaves the row's times on a clock that disagrees with ``gpu.csv``
and ``server_metrics.csv``, which the master samples. Moving every worker row onto the master's
clock fixes all three with one number per worker.

How (NTP's two-way estimate, with the messages loadknee already sends):

1. the master stamps each stage announcement with its clock when it sends it (``sent_unix_s``);
   the worker keeps ``down = min(worker receive time - master send time)`` = θ + d₁, where θ is
   the worker's clock minus the master's and d₁ the shortest master→worker delay seen;
2. each ``report_to_master`` carries the worker's send time and its ``down``; the master keeps
   ``up = min(master receive time - worker send time)`` = −θ + d₂;
3. θ = (down − up) / 2, wrong by at most (d₁ + d₂) / 2 = (down + up) / 2, recorded beside it as
   the bound. With ``up`` alone (no stage message reached the worker yet) θ = −up, assuming no
   delay (the bound is then unknown). The minimum over many messages drops the queueing delays.

The master subtracts θ from each worker row's ``start_unix_s`` and ``end_unix_s`` when the row
arrives, before it is placed; durations (e2e, TTFT, ITL) do not depend on any clock's origin.
The estimate improves as messages arrive, so θ can move by a millisecond between two rows of one
user, while a user's next request starts a fraction of a millisecond after its last one ended:
moved by the newer θ it would start before that end, and a count-closed window (a baseline of 3
requests, closed at the third's end) then held a fourth (a CI run: the fourth started 1.4 ms
before the third ended, on the master's clock). One user's rows keep their order: where the
newer θ would put a row before the user's last one ended, the row moves by the θ that user's
last row moved by (both estimates lie within the bound; the user's own clock is the better
witness of its order).
``run.json`` records each worker's offset, bound and message counts (``worker_clocks``).
Pure: the callers pass every time in; no locust, no clock read here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

#: key of the clock facts a worker adds to its ``report_to_master`` data
REPORT_CLOCK_KEY = "loadknee_clock"
#: key of the master's send time in a stage announcement
SENT_KEY = "sent_unix_s"


@dataclass(frozen=True)
class ClockOffset:
    """A worker's offset estimate: ``offset_s`` = its clock minus the master's."""

    offset_s: float
    bound_s: float | None  # |error| <= bound_s; None when only one direction was measured
    reports: int  # worker→master samples (reports)
    stage_messages: int  # master→worker samples the worker had counted

    def as_json(self) -> dict[str, Any]:
        return {
            "offset_s": round(self.offset_s, 6),
            "bound_s": None if self.bound_s is None else round(self.bound_s, 6),
            "reports": self.reports,
            "stage_messages": self.stage_messages,
        }


class DownwardDelay:
    """Worker side: the shortest ``receive - master send`` over the stage messages (θ + d₁)."""

    def __init__(self) -> None:
        self.min_s = math.inf
        self.samples = 0

    def observe(self, message: Mapping[str, Any], received_unix_s: float) -> None:
        sent = message.get(SENT_KEY)
        if isinstance(sent, int | float) and not isinstance(sent, bool):
            self.min_s = min(self.min_s, received_unix_s - float(sent))
            self.samples += 1

    def report(self, worker: str, now_unix_s: float) -> dict[str, Any]:
        """The facts for one ``report_to_master`` (sent at ``now_unix_s``, worker clock)."""
        down = self.min_s if self.samples else None
        return {"worker": worker, "sent_unix_s": now_unix_s, "down_s": down, "down_n": self.samples}


@dataclass
class _Worker:
    up_min_s: float = math.inf
    reports: int = 0
    down_s: float | None = None
    down_n: int = 0
    #: per user id: the offset its last row moved by and that row's end on the worker's clock
    last_by_user: dict[str, tuple[float, float]] = field(default_factory=dict)


class WorkerClocks:
    """Master side: per worker, the upward minimum and the worker's latest downward one."""

    def __init__(self) -> None:
        self._workers: dict[str, _Worker] = {}

    def observe(self, facts: Any, received_unix_s: float) -> str | None:
        """Take one report's clock facts; the worker's name, or None when there were none."""
        if not isinstance(facts, Mapping):
            return None
        sent = facts.get("sent_unix_s")
        if not isinstance(sent, int | float) or isinstance(sent, bool):
            return None
        name = str(facts.get("worker", ""))
        w = self._workers.setdefault(name, _Worker())
        w.up_min_s = min(w.up_min_s, received_unix_s - float(sent))
        w.reports += 1
        down = facts.get("down_s")
        if isinstance(down, int | float) and not isinstance(down, bool) and math.isfinite(down):
            w.down_s, w.down_n = float(down), int(facts.get("down_n") or 0)
        return name

    def offset(self, worker: str) -> ClockOffset | None:
        w = self._workers.get(worker)
        if w is None or not w.reports:
            return None
        if w.down_s is None:
            return ClockOffset(-w.up_min_s, None, w.reports, 0)
        theta = (w.down_s - w.up_min_s) / 2.0
        bound = max(0.0, (w.down_s + w.up_min_s) / 2.0)
        return ClockOffset(theta, bound, w.reports, w.down_n)

    def to_master(self, worker: str, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` with its start and end moved onto the master's clock (in place; returned),
        keeping the order of one user's rows (see the module's docstring)."""
        est = self.offset(worker)
        if est is None or est.offset_s == 0.0:
            return row
        theta = est.offset_s
        start, end, user = row.get("start_unix_s"), row.get("end_unix_s"), row.get("user_id")
        if _is_time(start) and _is_time(end) and user not in (None, ""):
            users = self._workers[worker].last_by_user
            last = users.get(str(user))
            if last is not None:
                last_theta, last_end = last
                # after the last row on the worker's clock, but before it once moved
                if start >= last_end and start - theta < last_end - last_theta:
                    theta = last_theta
            users[str(user)] = (theta, float(end))
        for key in ("start_unix_s", "end_unix_s"):
            value = row.get(key)
            if _is_time(value):
                row[key] = value - theta
        return row

    def as_json(self) -> dict[str, Any]:
        """Every worker's estimate, for ``run.json``'s ``worker_clocks``."""
        out: dict[str, Any] = {}
        for name in sorted(self._workers):
            est = self.offset(name)
            if est is not None:
                out[name] = est.as_json()
        return out


def _is_time(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)
