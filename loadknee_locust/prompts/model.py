"""The prompt value object and the interface every prompt source offers the user classes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Endpoint = Literal["chat", "completions"]


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt ready to send; its text never leaves the process (only ``prompt_hash`` does).

    Exactly one of ``text`` (a plain prompt; a single user message on chat) and ``messages``
    (replayed chat messages; joined into one string on completions) is set. ``prefix`` is the
    shared prefix (a system message on chat, leading text on completions). ``pin_output`` asks for
    ``ignore_eos``/``min_tokens`` so that ``max_tokens`` is the exact output length.
    """

    text: str | None
    messages: tuple[Mapping[str, Any], ...] | None
    max_tokens: int
    pin_output: bool
    target_input_tokens: int | None
    target_output_tokens: int | None
    prompt_hash: str
    prefix: str = ""

    @classmethod
    def hashed(
        cls,
        prefix: str,
        text: str | None,
        messages: tuple[Mapping[str, Any], ...] | None,
        max_tokens: int,
        *,
        pin: bool,
        input_tokens: int | None = None,
    ) -> Prompt:
        """A prompt hashed as it is sent; ``pin`` makes ``max_tokens`` the output length it
        targets, ``input_tokens`` the prompt length it targets (None: no target)."""
        target_output = max_tokens if pin else None
        digest = prompt_hash(prefix, text, messages)
        return cls(text, messages, max_tokens, pin, input_tokens, target_output, digest, prefix)


def prompt_hash(prefix: str, text: str | None, messages: Any = None) -> str:
    """sha256 prefix (16 hex) of what is sent: prefix + text, or prefix + messages as JSON."""
    h = hashlib.sha256(prefix.encode("utf-8"))
    if messages is not None:
        h.update(json.dumps(messages, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    else:
        h.update((text or "").encode("utf-8"))
    return h.hexdigest()[:16]


class PromptSource(Protocol):
    """What the user classes need from a source (fixed length, log replay)."""

    kind: str

    def next_prompt(self, endpoint: Endpoint) -> Prompt:
        """The next prompt to send to ``endpoint`` (sources may calibrate per endpoint)."""
        ...

    def info(self) -> dict[str, Any]:
        """JSON-ready description for run.json: kind, targets, log sha256, bad lines, ..."""
        ...
