"""Replay a production log's in-flight curve (closed loop): users(t) = the log's requests in flight.

    locust -f locustfiles/curve_replay.py --headless -H http://127.0.0.1:8000 \\
        --llm-replay-curve prod.jsonl --llm-time-scale 72 --llm-curve-window-seconds 30 \\
        --llm-curve-scales 1,1.5,2

A day of log replays in 20 minutes at --llm-time-scale 72; each window of 30 s is one stage of
the record table, and each scale replays the whole curve once. The log needs a start time per
request and its end or duration (or --llm-curve-latency-seconds); prompt logs with a time field
and Mooncake / Azure / BurstGPT traces work. Each request has the lengths of a logged request
around the replayed time; no prompt text is read or sent. With workers, add --expect-workers N
to the master: each worker takes its own share of the log's records.
"""

from __future__ import annotations

from typing import Any

from locust import events

from loadknee_locust import ChatUser, KneeShape, install  # noqa: F401  (KneeShape replays the curve)
from loadknee_locust.plugin.options import llm_options

install(events)


@events.init.add_listener
def _require_log(environment: Any, **_: Any) -> None:
    parsed = environment.parsed_options  # in the web UI the form may give the log later
    headless = parsed is not None and getattr(parsed, "headless", False)
    if headless and not llm_options(environment).replay_curve:
        raise SystemExit("curve_replay.py: give the log with --llm-replay-curve FILE")


class ReplayChat(ChatUser):
    """One request at a time, back to back: the users are the requests in flight."""
