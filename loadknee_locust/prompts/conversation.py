"""Multi-turn conversations: each turn's prompt carries the previous turns, as a chat client does.

A :class:`Conversation` draws each turn's new user message from a prompt source (fixed length
or replay; the shared system prompt, ``--llm-shared-prefix-tokens``, stays the prompt's
``prefix``) and sends it after the history so far: ``[user 0, assistant 0, ..., user k]``. The
assistant messages stand in for the server's answers: filler words, one per completion token the
server reported (the answer's text itself is not kept: only its length matters to the server's
work and its prefix cache, which holds prompt blocks). So turn ``k``'s prompt grows by the last
answer, the new user message and the template's per-message tokens.

The first turn keeps its source's target input length; later turns have none (their length is
the history's), only the target output length. :class:`ThinkTime` is the pause between turns:
``2`` (fixed seconds), ``exp:2`` (exponential, mean 2 s) or ``uniform:1,3``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from loadknee_locust.prompts.filler import DEFAULT_VOCABULARY, Vocabulary, filler
from loadknee_locust.prompts.model import Endpoint, Prompt, PromptSource, prompt_hash

ThinkKind = Literal["fixed", "exp", "uniform"]


@dataclass(frozen=True, slots=True)
class ThinkTime:
    """Seconds between a turn's answer and the next turn (see the module docstring)."""

    kind: ThinkKind = "fixed"
    a: float = 0.0
    b: float = 0.0

    @classmethod
    def parse(cls, text: str) -> ThinkTime:
        """``"2"``, ``"exp:2"`` or ``"uniform:1,3"``; ValueError with the accepted forms."""
        raw = text.strip()
        forms = "seconds (2), exp:MEAN (exp:2) or uniform:LOW,HIGH (uniform:1,3)"
        try:
            if raw.startswith("exp:"):
                mean = float(raw[4:])
                if mean < 0:
                    raise ValueError
                return cls("exp", mean)
            if raw.startswith("uniform:"):
                low, high = (float(x) for x in raw[8:].split(","))
                if not 0 <= low <= high:
                    raise ValueError
                return cls("uniform", low, high)
            value = float(raw or 0)
        except ValueError:
            raise ValueError(f"--llm-think-time must be {forms}, got {text!r}") from None
        if value < 0:
            raise ValueError(f"--llm-think-time must be ≥ 0, got {text!r}")
        return cls("fixed", value)

    @property
    def mean_s(self) -> float:
        return (self.a + self.b) / 2 if self.kind == "uniform" else self.a

    def draw(self, rng: random.Random) -> float:
        if self.kind == "exp":
            return rng.expovariate(1.0 / self.a) if self.a > 0 else 0.0
        if self.kind == "uniform":
            return rng.uniform(self.a, self.b)
        return self.a

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "mean_s": self.mean_s, "a": self.a, "b": self.b}


class Conversation:
    """One conversation's history; :meth:`next_prompt` then :meth:`answered` for each turn."""

    def __init__(
        self,
        source: PromptSource,
        endpoint: Endpoint,
        *,
        conversation_id: str,
        vocabulary: Vocabulary = DEFAULT_VOCABULARY,
    ) -> None:
        self.source = source
        self.endpoint = endpoint
        self.conversation_id = conversation_id
        self.vocabulary = vocabulary
        self.turn = 0
        self._history: list[Mapping[str, Any]] = []
        self._pending: list[Mapping[str, Any]] = []

    def next_prompt(self) -> Prompt:
        """This turn's prompt: the history, then a new user message from the source."""
        fresh = self.source.next_prompt(self.endpoint)
        if fresh.messages is not None:
            new = list(fresh.messages)
        else:
            new = [{"role": "user", "content": fresh.text or ""}]
        self._pending = new
        if self.turn == 0:
            return fresh
        messages = (*self._history, *new)
        return Prompt(
            text=None,
            messages=messages,
            max_tokens=fresh.max_tokens,
            pin_output=fresh.pin_output,
            target_input_tokens=None,  # the history's length, not the source's target
            target_output_tokens=fresh.target_output_tokens,
            prompt_hash=prompt_hash(fresh.prefix, None, list(messages)),
            prefix=fresh.prefix,
        )

    def answered(self, completion_tokens: int) -> None:
        """The turn was answered with ``completion_tokens``: keep it in the history."""
        reply = filler(max(1, completion_tokens), vocabulary=self.vocabulary)
        self._history += [*self._pending, {"role": "assistant", "content": reply}]
        self._pending = []
        self.turn += 1
