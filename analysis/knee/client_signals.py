"""Knee signals from the client's own queue estimate (:mod:`analysis.stages.client_queue`).

* :func:`client_saturation_signal` — the client-side twin of the server's own saturation rule:
  more users than the server ran at once, with requests waiting for a slot. Where the server
  exports no running/waiting gauges it carries the same weight as they would.
* :func:`cross_check` — where both exist, the client's running count against the server's gauge
  and the two saturation verdicts against each other; a disagreement is said with both figures.
* :func:`starved` — stage validity: the requests the client kept in flight against its users.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from analysis import rules
from analysis.model import Signal
from analysis.numeric import num

if TYPE_CHECKING:
    from analysis.knee.signals import StageContext

#: mean waiting requests (seen from the client) that, with more users than the server ran,
#: mean the server is saturated: half a request, on average, waiting for a slot
CLIENT_SATURATED_WAITING = 0.5
#: the running count must reach this share of the most any stage ran
RUNNING_SHARE = 0.9
#: a stage whose client kept fewer than this share of its users in flight was starved
IN_FLIGHT_SHARE = 0.9
#: the client's running count and the server's gauge disagree beyond this share
DISAGREE_SHARE = 0.10


def client_slots(steps: pd.DataFrame) -> float | None:
    """The most requests any step stage ran at once by the client's estimate (None: unknown)."""
    if "client_running" not in steps:
        return None
    running = steps["client_running"].dropna()
    return float(running.max()) if len(running) and running.max() > 0 else None


def client_saturation_signal(row: pd.Series, ctx: StageContext) -> Signal:
    """Fires when the stage had more users in flight than the server ran at once (by more than
    half a request), its running count reached ``RUNNING_SHARE`` of the most any stage ran,
    and at least ``CLIENT_SATURATED_WAITING`` requests waited on average (the interval's lower
    bound when there is one)."""
    running, waiting = num(row.get("client_running")), num(row.get("client_waiting"))
    slots = ctx.client_slots
    if running is None or waiting is None or not slots:
        return Signal(
            "client_saturated", False, None, None, "no client-side queue estimate (needs TTFT)"
        )
    low = num(row.get("client_waiting_low"))
    decisive = waiting if low is None else low
    batch = num(row.get("batch_size")) or 1.0
    users = float(row["target_users"]) * batch
    share, wait_ms = num(row.get("client_wait_share_pct")), num(row.get("client_wait_ms"))
    # a group of late requests is direct evidence of a queue; without one, many short waits
    # must add up to a whole request waiting on average
    needed = CLIENT_SATURATED_WAITING if share else 2 * CLIENT_SATURATED_WAITING
    fired = users > running + 0.5 and running >= RUNNING_SHARE * slots and decisive >= needed
    late = ""
    if share is not None and share > 0 and wait_ms is not None:
        late = f"; {share:.0f} % of requests waited ~{wait_ms:,.0f} ms for their first token"
    r_lo, r_hi = num(row.get("client_running_low")), num(row.get("client_running_high"))
    band = f" (95 %: {r_lo:.1f}–{r_hi:.1f})" if r_lo is not None and r_hi is not None else ""
    bound = f", at least {low:.1f}" if low is not None else ""
    return Signal(
        "client_saturated",
        fired,
        waiting,
        CLIENT_SATURATED_WAITING,
        f"seen from the client: the server ran about {running:.1f} at once{band} "
        f"(its most in any stage: {slots:.1f}) while {waiting:.1f} waited{bound}, "
        f"{users:g} in flight{late} (saturated: more users than it ran, "
        f"{needed:g} or more waiting) {rules.cite('client_queue')}",
    )


def cross_check(row: pd.Series, server: Signal, client: Signal) -> str | None:
    """Where the server's gauges and the client's estimate both exist: a sentence when they
    disagree (running counts more than ``DISAGREE_SHARE`` apart, or opposite verdicts)."""
    gauge, estimate = num(row.get("running_mean")), num(row.get("client_running"))
    if gauge is None or estimate is None or server.value is None or client.value is None:
        return None
    parts = []
    if gauge > 0 and abs(estimate - gauge) > DISAGREE_SHARE * gauge:
        parts.append(
            f"the client's estimate of requests running ({estimate:.1f}) is "
            f"{abs(estimate / gauge - 1) * 100:.0f} % off the server's gauge ({gauge:.1f})"
        )
    if server.fired != client.fired:
        said = "saturated" if server.fired else "not saturated"
        parts.append(
            f"the server's counts call the stage {said}, the client's queue estimate does not "
            "(the server's word decides)"
        )
    if not parts:
        return None
    return "; ".join(parts) + f" {rules.cite('client_queue')}"


def starved(row: pd.Series) -> Signal:
    """Stage validity (Little's law): the client's requests in flight against its users.

    A closed loop keeps one request per user outstanding; markedly fewer (below
    ``IN_FLIGHT_SHARE``) means the client did not drive the load the stage claims — its
    users waited on the client itself (a busy load generator, back-off, coordinated
    omission) — and the stage's figures understate what the server would see."""
    in_flight = num(row.get("client_in_flight"))
    batch = num(row.get("batch_size")) or 1.0
    users = float(row["target_users"]) * batch
    if in_flight is None or users <= 0:
        return Signal("client_starved", False, None, IN_FLIGHT_SHARE, "no in-flight estimate")
    share = in_flight / users
    if int(row.get("errors", 0) or 0) > 0:  # users back off after failures: gaps by design
        return Signal(
            "client_starved",
            False,
            share,
            IN_FLIGHT_SHARE,
            f"the client kept {in_flight:.1f} requests in flight on average for {users:g} users "
            "(requests failed: the users' back-off leaves gaps by design)",
        )
    return Signal(
        "client_starved",
        share < IN_FLIGHT_SHARE,
        share,
        IN_FLIGHT_SHARE,
        f"the client kept {in_flight:.1f} requests in flight on average for {users:g} users "
        f"({share * 100:.0f} %; served/s × mean e2e)"
        + (
            f": client-starved, untrusted (below {IN_FLIGHT_SHARE * 100:.0f} %) "
            f"{rules.cite('stage_validity')}"
            if share < IN_FLIGHT_SHARE
            else ""
        ),
    )
