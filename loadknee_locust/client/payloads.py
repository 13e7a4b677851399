"""Build the JSON request bodies for /v1/chat/completions and /v1/completions from prompts.

The only place that knows the two endpoints' request shapes; responses are parsed by ``sse``
for both. Streaming bodies ask for ``stream_options.include_usage`` so the server's own token
counts arrive in the last chunk. A pinned output length is ``max_tokens`` plus ``ignore_eos`` and
``min_tokens`` (vLLM, SGLang, llama.cpp accept them; ``--llm-no-ignore-eos`` turns them off for
servers that reject unknown fields). ``extra`` (``--llm-extra-body``) is merged last, so the user
can override anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loadknee_locust.prompts.model import Prompt

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"


@dataclass(frozen=True, slots=True)
class BodyOptions:
    """Per-run request settings that do not depend on the prompt."""

    model: str
    stream: bool = True
    temperature: float = 0.0
    ignore_eos: bool = True  # allowed to pin output lengths (off with --llm-no-ignore-eos)
    extra: Mapping[str, Any] = field(default_factory=dict)


def parse_extra_body(text: str) -> dict[str, Any]:
    """``--llm-extra-body``: a JSON object, or empty; anything else is a clear error."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"--llm-extra-body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("--llm-extra-body must be a JSON object, e.g. '{\"top_p\": 1}'")
    return value


def chat_messages(prompt: Prompt) -> list[Mapping[str, Any]]:
    """The messages to send: replayed messages, or the prompt text as one user message."""
    messages: list[Mapping[str, Any]] = []
    if prompt.prefix:
        messages.append({"role": "system", "content": prompt.prefix})
    if prompt.messages is not None:
        messages.extend(prompt.messages)
    else:
        messages.append({"role": "user", "content": prompt.text or ""})
    return messages


def completion_text(prompt: Prompt) -> str:
    """The raw prompt string: text, or replayed messages' text joined by newlines."""
    if prompt.messages is None:
        body = prompt.text or ""
    else:
        body = "\n".join(_message_text(m) for m in prompt.messages)
    return prompt.prefix + "\n" + body if prompt.prefix else body


def _message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def _common(options: BodyOptions, max_tokens: int, pin: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": options.model,
        "max_tokens": max_tokens,
        "temperature": options.temperature,
        "stream": options.stream,
    }
    if options.stream:
        body["stream_options"] = {"include_usage": True}
    if pin and options.ignore_eos:
        body["ignore_eos"] = True
        body["min_tokens"] = max_tokens
    return body


def chat_body(options: BodyOptions, prompt: Prompt) -> dict[str, Any]:
    """Body for /v1/chat/completions."""
    body = _common(options, prompt.max_tokens, prompt.pin_output)
    body["messages"] = chat_messages(prompt)
    body.update(options.extra)
    return body


def completions_body(options: BodyOptions, prompts: Sequence[Prompt]) -> dict[str, Any]:
    """Body for /v1/completions: one prompt, or a list of k prompts (batch mode)."""
    if not prompts:
        raise ValueError("completions_body needs at least one prompt")
    max_tokens = max(p.max_tokens for p in prompts)
    body = _common(options, max_tokens, all(p.pin_output for p in prompts))
    texts = [completion_text(p) for p in prompts]
    body["prompt"] = texts[0] if len(texts) == 1 else texts
    body.update(options.extra)
    return body


def encode(body: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON (what goes on the wire)."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
