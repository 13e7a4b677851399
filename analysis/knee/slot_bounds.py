"""The slots a queue proved: the most requests the server ran at once while others waited.

Where a stage queued, the server's running count is a limit, and ``max_concurrency`` is no
higher than it: from the server's own gauges where it exports them
(:func:`saturated_slots`), from the client's estimate of the queue where it does not
(:func:`client_seen_slots`). The gauges decide where they exist: the client's estimate counts
only in stages without them (:func:`client_queued`).
"""

from __future__ import annotations

from typing import Any

from analysis.knee.signals import StageContext
from analysis.knee.stage_verdict import has_fired, signal_of
from analysis.model import StageVerdict
from loadknee_core.numeric import num


def saturated_slots(verdicts: list[StageVerdict], ctx: StageContext) -> int | None:
    """The server's running maximum, when some stage saw it saturated (requests waiting)."""
    if any(has_fired(v, "server_saturated") for v in verdicts):
        return int(ctx.server_slots) if ctx.server_slots else None
    return None


def client_seen_slots(rows: list[Any], verdicts: list[StageVerdict]) -> int | None:
    """The requests the server ran at once by the client's estimate: the estimate of the stage
    the client saw most deeply queued (the most waiting on average; on a tie the lower estimate),
    among the stages it saw saturated, rounded (None when no stage was).

    The deepest queue, because just past the limit the estimate errs both ways and deeper it
    settles: 44 users on 40 slots read 41.4 running in an exact FIFO loop (out-of-step requests
    all wait a little, which reads as service), 48 read 40.0; on a busy machine (load 3.6 on 2
    cores) 7 users on 6 slots read 5.46 running and 0.86 waiting (the client's gaps between
    requests grow), 8 users read 6.0 and 2.0. The lowest estimate, the rule before, answered 5
    for 6 slots there.

    Only stages without the server's own gauges count (:func:`client_queued`): where the server
    counts its queue and saw nothing wait, a busy client's late requests are not a limit (a
    server refusing above 20 that never queued read 18.2 running at 20 users from the client
    beside three other test processes, and the answer fell to 18)."""
    seen = [
        (num(row.get("client_waiting")) or 0.0, -float(row["client_running"]))
        for row, v in zip(rows, verdicts, strict=True)
        if client_queued(v)
    ]
    return max(1, int(-max(seen)[1] + 0.5)) if seen else None


def server_gauged(verdict: StageVerdict) -> bool:
    """The server exported its running and waiting gauges at this stage."""
    server = signal_of(verdict, "server_saturated")
    return server is not None and server.value is not None


def client_queued(verdict: StageVerdict) -> bool:
    """The client's estimate saw requests wait where the server exports no gauges of its own
    (the server's counts decide where it has them), and no later stage showed it passing
    (:func:`~analysis.knee.queue_demotions.demote_passing_queues`)."""
    if has_fired(verdict, "queue_passed"):
        return False
    return has_fired(verdict, "client_saturated") and not server_gauged(verdict)


def queued(verdict: StageVerdict) -> bool:
    """The server's counts, or (without them) the client's estimate, saw requests wait."""
    return has_fired(verdict, "server_saturated") or client_queued(verdict)
