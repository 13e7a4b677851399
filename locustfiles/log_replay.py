"""Replay a production prompt log through the stepped sweep (benchmark vs replay = tail buffer).

    locust -f locustfiles/log_replay.py --headless -H http://127.0.0.1:8000 \\
        --llm-prompt-log prod.jsonl --llm-sample-without-replacement --llm-seed 1

The log is JSONL of OpenAI request bodies (``messages`` or ``prompt``), JSONL/CSV with prompt
text and an optional ``max_tokens`` / ``output_tokens``, or lengths only (``input_tokens``,
``output_tokens``: prompts of those lengths are synthesised). It is indexed in one streaming pass
(its sha256 goes into run.json), malformed lines are counted and reported with line numbers, and
only lengths and a hash of each prompt reach any output. ``--llm-output-scale`` stretches the
replayed output lengths; ``--llm-shared-prefix-tokens N`` adds a common system prefix.
"""

from __future__ import annotations

from typing import Any

from locust import events

from loadknee_locust import ChatUser, KneeShape, install  # noqa: F401  (KneeShape: the stepped shape Locust picks up)
from loadknee_locust.plugin.options import llm_options

install(events)


@events.init.add_listener
def _require_log(environment: Any, **_: Any) -> None:
    if environment.parsed_options is not None and not llm_options(environment).prompt_log:
        raise SystemExit("log_replay.py: give the log with --llm-prompt-log FILE")


class ReplayChat(ChatUser):
    """Replayed ``messages`` go out as they were; plain prompts become one user message."""
