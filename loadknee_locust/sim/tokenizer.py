"""A deterministic tokenizer, so that prompt lengths are exact and calibratable.

The rule: every maximal run of word characters (``\\w+``, Unicode-aware) is one token and every
other non-space character is one token on its own; whitespace is free. So ``"Hello, world!"`` is 4
tokens (``Hello`` ``,`` ``world`` ``!``) and ``" lorem ipsum"`` is 2.

Chat requests add a fixed template overhead, as real chat templates do (role headers, separators,
the generation prompt): ``chat_tokens_per_message`` per message plus ``chat_tokens_constant`` once
(OpenAI's cookbook counts 3 and 3). Text parts of multi-part ``content`` lists are counted; other
parts (images) count as nothing.

Output tokens are drawn from :data:`VOCAB`: each entry is one space plus one word, so the generated
text re-tokenizes to exactly ``completion_tokens`` tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

TOKEN_RE: Final = re.compile(r"\w+|[^\w\s]")

_WORDS: Final = (
    "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "
    "incididunt ut labore et dolore magna aliqua enim ad minim veniam quis nostrud "
    "exercitation ullamco laboris nisi aliquip ex ea commodo consequat duis aute irure "
    "in reprehenderit voluptate velit esse cillum fugiat nulla pariatur excepteur sint "
    "occaecat cupidatat non proident sunt culpa qui officia deserunt mollit anim id est"
)
VOCAB: Final[tuple[str, ...]] = tuple(" " + word for word in _WORDS.split())


def count_tokens(text: str) -> int:
    """Number of tokens in ``text`` under the rule in the module docstring."""
    return sum(1 for _ in TOKEN_RE.finditer(text))


def tokenize(text: str) -> list[str]:
    """The tokens themselves (for documentation and tests; the server only counts)."""
    return TOKEN_RE.findall(text)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    raise ValueError("message content must be a string, a list of parts or null")


def count_chat_tokens(
    messages: Iterable[Mapping[str, Any]], *, per_message: int, constant: int
) -> int:
    """Prompt tokens of a chat request: content tokens + template overhead."""
    total = constant
    for message in messages:
        if not isinstance(message, Mapping):
            raise ValueError("each message must be an object")
        total += per_message + count_tokens(_content_text(message.get("content")))
    return total


def chat_tokens(
    messages: Iterable[Mapping[str, Any]], *, per_message: int, constant: int
) -> list[str]:
    """The tokens of a chat prompt as the prefix cache sees them: per message its template
    tokens (naming its role) then its content's; the generation prompt's ``constant`` last. As
    many as :func:`count_chat_tokens` counts."""
    tokens: list[str] = []
    for message in messages:
        if not isinstance(message, Mapping):
            raise ValueError("each message must be an object")
        role = str(message.get("role", ""))
        tokens.extend(f"<|{role}|{i}|>" for i in range(per_message))
        tokens.extend(tokenize(_content_text(message.get("content"))))
    tokens.extend(f"<|gen|{i}|>" for i in range(constant))
    return tokens
