"""Choose prompt words with the server's own tokenize endpoint, when it has one (llama.cpp, vLLM).

Shapes tried, in order: llama.cpp ``POST /tokenize {"content"}`` → ``{"tokens": [...]}``, then
vLLM / SGLang ``POST /tokenize {"model", "prompt"}`` → ``{"count", "tokens"}``. The first shape
that answers a test text is used for the rest; special tokens the server may add cancel out, as
callers only use differences of counts. The session should have a private event hook: these
requests are calibration, not load.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from loadknee_locust.client import payloads
from loadknee_locust.client.sse import short_text
from loadknee_locust.prompts.filler import DEFAULT_VOCABULARY, Vocabulary
from loadknee_locust.prompts.vocab import choose_vocabulary

log = logging.getLogger(__name__)

TOKENIZE_PATH = "/tokenize"


def _count_from(raw: bytes) -> int:
    obj = json.loads(raw)
    if isinstance(obj, dict):
        count = obj.get("count")
        if isinstance(count, int):
            return count
        tokens = obj.get("tokens")
        if isinstance(tokens, list):
            return len(tokens)
    raise ValueError("the tokenize answer has neither count nor tokens")


def tokenize_counter(
    session: Any, model: str, headers: dict[str, str]
) -> Callable[[str], int] | None:
    """``count(text) -> tokens`` through the first body shape the server accepts, else None."""
    shapes: tuple[Callable[[str], dict[str, Any]], ...] = (
        lambda text: {"content": text},
        lambda text: {"model": model, "prompt": text},
    )
    for shape in shapes:

        def count(text: str, shape: Callable[[str], dict[str, Any]] = shape) -> int:
            resp = session.post(
                TOKENIZE_PATH,
                data=payloads.encode(shape(text)),
                headers={"Content-Type": "application/json", **headers},
            )
            if resp.status_code != 200:
                raise ValueError(f"{TOKENIZE_PATH} got HTTP {resp.status_code}")
            return _count_from(resp.content or b"")

        try:
            if count("ref the") > 0:
                return count
        except Exception:  # no such endpoint or another shape: try the next
            continue
    return None


def server_vocabulary(session: Any, model: str, headers: dict[str, str]) -> Vocabulary | None:
    """Prompt words of uniform token cost on the server's tokenizer (``prompts.vocab``); None when
    it has no tokenize endpoint (the default words stay: exact on the simulator); the default
    words with a ``note`` (and one warning) when the check fails."""
    count = tokenize_counter(session, model, headers)
    if count is None:
        log.info("loadknee: no tokenize endpoint; default prompt words")
        return None
    try:
        vocabulary = choose_vocabulary(count)
    except Exception as exc:
        note = short_text(f"tokenizer-chosen words failed: {exc}")
        log.warning("loadknee: %s; default prompt words, lengths may vary", note)
        return replace(DEFAULT_VOCABULARY, note=note)
    log.info(
        "loadknee: prompt words chosen with the server's tokenizer: tag of %d words of %d "
        "token(s), filler %s token(s) a word",
        vocabulary.tag_digits,
        vocabulary.tag_word_tokens,
        vocabulary.filler_word_tokens or "mixed",
    )
    return vocabulary
