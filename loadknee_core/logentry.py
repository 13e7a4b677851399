"""Turn one record of a prompt log (a JSON object or a CSV row) into a :class:`LogEntry`.

Accepted shapes (``--llm-log-format`` restricts them; ``auto`` takes any):

* ``openai``: an OpenAI request body with ``messages`` (chat) or ``prompt`` (completions), also
  wrapped as in the Batch API (``{"body": {...}}``); ``max_tokens`` / ``max_completion_tokens``
  is a cap (the reply may stop earlier, as it did in production);
* ``text``: ``prompt`` or ``text`` with optional ``max_tokens`` (a cap) or ``output_tokens`` (the
  length the reply really had: then it is pinned);
* ``lengths``: ``input_tokens`` and ``output_tokens`` only; the prompt is synthesised. The
  public traces' length fields count as these: Mooncake's ``input_length`` / ``output_length``,
  the Azure trace's ``ContextTokens`` / ``GeneratedTokens``, BurstGPT's ``Request tokens`` /
  ``Response tokens`` (a failed BurstGPT request, 0 response tokens, is a bad record).

Errors are ``ValueError`` with a reason that never quotes the record (it may hold prompt text).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

EntryKind = Literal["messages", "text", "lengths"]
LogFormat = Literal["auto", "openai", "text", "lengths"]

_ALLOWED: dict[str, tuple[str, ...]] = {
    "auto": ("messages", "text", "lengths"),
    "openai": ("messages", "text"),
    "text": ("text",),
    "lengths": ("lengths",),
}


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One usable log record."""

    kind: EntryKind
    messages: tuple[Mapping[str, Any], ...] | None = None
    text: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None  # observed reply length: pinned when replayed
    max_tokens: int | None = None  # a cap only


#: (input, output) length fields of public traces, read as ``input_tokens`` / ``output_tokens``
LENGTH_ALIASES: tuple[tuple[str, str], ...] = (
    ("input_length", "output_length"),  # Mooncake
    ("ContextTokens", "GeneratedTokens"),  # Azure LLM inference trace
    ("Request tokens", "Response tokens"),  # BurstGPT
)


def _count(value: Any, name: str) -> int | None:
    """A token count from JSON (int) or CSV (string); empty → None; else a clear error."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"{name} is not a whole number")
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"{name} is not a number") from None
    if not isinstance(value, int | float) or value != int(value) or value < 0:
        raise ValueError(f"{name} is not a whole number ≥ 0")
    return int(value)


def entry_from_mapping(obj: Any, fmt: LogFormat = "auto") -> LogEntry:
    """Validate and convert one record; raises ``ValueError(reason)``."""
    if not isinstance(obj, Mapping):
        raise ValueError("not a JSON object")
    if isinstance(obj.get("body"), Mapping):
        obj = obj["body"]
    if "input_tokens" not in obj:
        for in_name, out_name in LENGTH_ALIASES:
            if in_name in obj:
                obj = {"input_tokens": obj[in_name], "output_tokens": obj.get(out_name)}
                break
    cap = _count(obj.get("max_tokens"), "max_tokens")
    if cap is None:
        cap = _count(obj.get("max_completion_tokens"), "max_completion_tokens")
    observed = _count(obj.get("output_tokens"), "output_tokens")
    entry: LogEntry
    messages = obj.get("messages")
    prompt = obj.get("prompt", obj.get("text"))
    if messages is not None:
        if not isinstance(messages, list) or not messages:
            raise ValueError("messages is not a non-empty list")
        if not all(isinstance(m, Mapping) and "role" in m for m in messages):
            raise ValueError("a message is not an object with a role")
        entry = LogEntry(
            "messages", messages=tuple(messages), output_tokens=observed, max_tokens=cap
        )
    elif prompt is not None:
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt:
            raise ValueError("prompt/text is not a non-empty string")
        entry = LogEntry("text", text=prompt, output_tokens=observed, max_tokens=cap)
    elif "input_tokens" in obj:
        n_in = _count(obj.get("input_tokens"), "input_tokens")
        if n_in is None or n_in < 1:
            raise ValueError("input_tokens is missing or < 1")
        if observed is None:
            observed = cap
        if observed is None or observed < 1:
            raise ValueError("output_tokens is missing or < 1")
        entry = LogEntry("lengths", input_tokens=n_in, output_tokens=observed)
    else:
        raise ValueError("no messages, prompt, text or input_tokens")
    if entry.kind not in _ALLOWED[fmt]:
        raise ValueError(f"a {entry.kind} record in a --llm-log-format {fmt} log")
    return entry
