"""Open loop: request-rate stages, or a log's requests at their logged times.

    locust -f locustfiles/open_loop.py --headless -H http://127.0.0.1:8000 \\
        --llm-rates 2,4,8 --llm-arrivals poisson --llm-stage-seconds 60
    locust -f locustfiles/open_loop.py --headless -H http://127.0.0.1:8000 \\
        --llm-arrival-log trace.jsonl --llm-time-scale 60 --llm-max-in-flight 64

One dispatcher per process sends each planned request at its time through at most
``--llm-max-in-flight`` slots; a request that waited for a slot records the wait
(``send_wait_ms``) and its latency from the planned time (``e2e_intended_ms``).
"""

from __future__ import annotations

from locust import events

from loadknee_locust import install
from loadknee_locust.arrivals.dispatcher import OpenLoopUser
from loadknee_locust.arrivals.shape import OpenLoopShape

install(events)


class Chat(OpenLoopUser):
    """Streams /v1/chat/completions at the planned times."""

    endpoint = "chat"
    request_name = "chat"


class Shape(OpenLoopShape):
    """Rate stages from --llm-rates, or one replay stage from --llm-arrival-log."""
