"""The locustfile ``loadknee run`` uses for open-loop load (``--rates`` or ``--arrival-log``).

One dispatcher per process (:class:`~loadknee_locust.arrivals.dispatcher.OpenLoopUser`) sends
the planned requests to ``--llm-endpoint``; the open-loop shape
(:class:`~loadknee_locust.arrivals.shape.OpenLoopShape`) runs the rate stages or the replay.
Loaded by Locust as a top-level module, so imports are absolute.
"""

from __future__ import annotations

from typing import Any

from locust import events

from loadknee_locust import install
from loadknee_locust.arrivals.dispatcher import OpenLoopUser
from loadknee_locust.arrivals.shape import OpenLoopShape
from loadknee_locust.plugin.options import llm_options

install(events)


class OpenLoop(OpenLoopUser):
    """Chat or completions (``--llm-endpoint``), one prompt per request."""

    def __init__(self, environment: Any) -> None:
        endpoint = llm_options(environment).endpoint
        # instance attributes shadow LLMUser's class defaults for this user only
        self.endpoint = endpoint  # type: ignore[misc,assignment]
        self.request_name = endpoint  # type: ignore[misc]
        super().__init__(environment)


class Shape(OpenLoopShape):
    """The concrete open-loop shape Locust picks up."""
