"""The locustfile ``loadknee run`` uses by default: one LLM user class set by ``--llm-*`` options.

``--llm-endpoint`` (chat | completions) and ``--llm-batch-size`` (> 1: batched completions) pick
what each user sends, ``--llm-turns`` (> 1) makes each user a conversation and
``--llm-classes`` gives each request a traffic class by weight; the stepped shape
(:class:`~loadknee_locust.plugin.shape.KneeShape`) runs the sweep; ``install`` adds the options,
the recorder, telemetry and the web UI tab. Loaded by Locust as a top-level module, so imports
are absolute.
"""

from __future__ import annotations

from typing import Any

from locust import events

from loadknee_locust import ConversationUser, KneeShape, install  # noqa: F401  (KneeShape: the concrete shape Locust picks up)
from loadknee_locust.plugin.options import llm_options

install(events)


class LLM(ConversationUser):
    """Chat or completions, single or batched, or conversations of ``--llm-turns`` turns with
    ``--llm-think-time`` between them, as the options say (read once per user)."""

    def __init__(self, environment: Any) -> None:
        opts = llm_options(environment)
        endpoint, batch = opts.endpoint, opts.batch_size
        # instance attributes shadow LLMUser's class defaults for this user only
        self.endpoint = endpoint  # type: ignore[misc,assignment]
        self.request_name = endpoint if batch <= 1 else "completions-batch"  # type: ignore[misc]
        self.batch_size = 1 if endpoint == "chat" else None  # type: ignore[misc]
        super().__init__(environment)
