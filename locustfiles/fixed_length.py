"""Fixed-length sweep: every prompt exactly ``--llm-input-tokens`` in, ``--llm-output-tokens`` out.

    locust -f locustfiles/fixed_length.py --headless -H http://127.0.0.1:8000 \\
        --llm-input-tokens 512 --llm-output-tokens 128 --llm-levels 1,2,4,8

The input length is calibrated against the server's tokenizer before the first request (a few
probes reading ``usage.prompt_tokens``); the output is pinned with max_tokens + ignore_eos +
min_tokens (``--llm-no-ignore-eos`` for servers that reject them). Each prompt starts with a
unique tag, so the prefix cache cannot flatter the numbers (``--llm-no-unique-tag`` to allow it).
"""

from __future__ import annotations

from locust import events

from loadknee_locust import ChatUser, KneeShape, install  # noqa: F401  (KneeShape: the stepped shape Locust picks up)

install(events)


class Chat(ChatUser):
    """Streams /v1/chat/completions; use CompletionsUser for /v1/completions."""
