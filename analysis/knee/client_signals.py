"""Knee signals from the client's own queue estimate (:mod:`analysis.stages.client_queue`).

* :func:`client_saturation_signal` — the client-side twin of the server's own saturation rule:
  more users than the server ran at once, with requests waiting for a slot. Where the server
  exports no running/waiting gauges it carries the same weight as they would.
* :func:`cross_check` — where both exist, the client's running count against the server's gauge
  and the two saturation verdicts against each other; a disagreement is kept with both figures.
* :func:`starved` — stage validity: the requests the client kept in flight against its users.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from analysis.knee.facts import (
    AbsentFact,
    ClientQueueFact,
    GaugeCheckFact,
    InFlightFact,
)
from analysis.model import Signal
from loadknee_core.numeric import num

if TYPE_CHECKING:
    from analysis.knee.signals import StageContext

#: mean waiting requests (seen from the client) that, with more users than the server ran,
#: mean the server is saturated: half a request, on average, waiting for a slot
CLIENT_SATURATED_WAITING = 0.5
#: the share of a stage's requests that must have come late for them to count as a group (direct
#: evidence of a queue). Past a slot limit most requests wait: 50-100 % on the 8-slot simulator at
#: 12-16 users, 73-81 % on llama-server (8 slots) at 9-10 users. A starved client delays a few:
#: 5-20 % at the refusal limit of a server that queues nothing (a 2-core box running 4 test
#: processes), whose 0.59 waiting on average then read as a queue and put the answer one below it
MIN_GROUP_SHARE_PCT = 25.0
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
    half a request), its running count reached ``RUNNING_SHARE`` of the most any stage ran
    (or, a length mix, the KV the decoding held reached that share of the most it ever held),
    and at least ``CLIENT_SATURATED_WAITING`` requests waited on average (the interval's lower
    bound when there is one) with at least ``MIN_GROUP_SHARE_PCT`` of its requests late, or a
    whole request waited on average without such a group."""
    running, waiting = num(row.get("client_running")), num(row.get("client_waiting"))
    slots = ctx.client_slots
    if running is None or waiting is None or not slots:
        return Signal("client_saturated", False, None, None, fact=AbsentFact("no_client_queue"))
    low = num(row.get("client_waiting_low"))
    decisive = waiting if low is None else low
    batch = num(row.get("batch_size")) or 1.0
    users = float(row["target_users"]) * batch
    share, wait_ms = num(row.get("client_wait_share_pct")), num(row.get("client_wait_ms"))
    # a group of late requests is direct evidence of a queue; without one (no late request, or
    # too few to be more than a busy client's stragglers), many short waits must add up to a
    # whole request waiting on average
    group = share is not None and share >= MIN_GROUP_SHARE_PCT
    needed = CLIENT_SATURATED_WAITING if group else 2 * CLIENT_SATURATED_WAITING
    # the server ran all it would: its running count reached the most any stage ran or, where
    # the lengths vary under a KV budget, the KV it held reached the most it ever held (fewer
    # long requests fit than short ones, so the count it ran moves with the mix: kv_grants)
    fill = num(row.get("client_kv_fill_pct"))
    by_count = running >= RUNNING_SHARE * slots
    by_kv = not by_count and fill is not None and fill >= RUNNING_SHARE * 100.0
    fired = users > running + 0.5 and (by_count or by_kv) and decisive >= needed
    fact = ClientQueueFact(
        "client_saturated",
        running,
        num(row.get("client_running_low")),
        num(row.get("client_running_high")),
        slots,
        waiting,
        low,
        users,
        share,
        wait_ms,
        needed,
        kv_fill_pct=fill if by_kv else None,
    )
    return Signal("client_saturated", fired, waiting, CLIENT_SATURATED_WAITING, fact=fact)


def cross_check(row: pd.Series, server: Signal, client: Signal) -> GaugeCheckFact | None:
    """Where the server's gauges and the client's estimate both exist: what they disagree on
    (running counts more than ``DISAGREE_SHARE`` apart, or opposite verdicts), or None."""
    gauge, estimate = num(row.get("running_mean")), num(row.get("client_running"))
    if gauge is None or estimate is None or server.value is None or client.value is None:
        return None
    running_off = gauge > 0 and abs(estimate - gauge) > DISAGREE_SHARE * gauge
    differ = server.fired != client.fired
    if not running_off and not differ:
        return None
    return GaugeCheckFact(
        "gauges_disagree", estimate, gauge, running_off, server.fired if differ else None
    )


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
        return Signal(
            "client_starved", False, None, IN_FLIGHT_SHARE, fact=AbsentFact("no_in_flight")
        )
    share = in_flight / users
    if int(row.get("errors", 0) or 0) > 0:  # users back off after failures: gaps by design
        fact = InFlightFact("in_flight_after_errors", in_flight, users, share, IN_FLIGHT_SHARE)
        return Signal("client_starved", False, share, IN_FLIGHT_SHARE, fact=fact)
    fact = InFlightFact("in_flight", in_flight, users, share, IN_FLIGHT_SHARE)
    return Signal("client_starved", share < IN_FLIGHT_SHARE, share, IN_FLIGHT_SHARE, fact=fact)
