"""Parse an OpenAI-style response, streamed (SSE) or whole, into what one request produced.

One parser serves every endpoint (chat, completions, batched completions) and every server we
know (vLLM, SGLang, TGI, llama.cpp): payload builders differ, responses are read the same way.

Streams are fed one line at a time (``StreamParser.feed_line``), as read from the socket with
``readline(b"\\n")``, together with the ``perf_counter`` stamp of the read, so the parser never
buffers more than one event and the timing of each content chunk is the moment its line arrived.

Chunk kinds, decided per ``data:`` event:

* **content**: some choice carries generated text (``delta.content``, ``delta.reasoning_content``
  / ``delta.reasoning``, ``delta.tool_calls`` or, for completions, ``text``): it is timed;
* **role-only** / empty deltas: ignored (a role announcement is not a token);
* **usage**: ``usage`` with token counts, wherever it appears (vLLM's final ``choices: []``
  chunk; llama.cpp's finish_reason chunk); llama.cpp's ``timings`` (``prompt_n`` /
  ``predicted_n``) is the fallback when no ``usage`` ever comes;
* **error**: an ``error`` member (or ``object == "error"``) — the stream failed server-side;
* **malformed**: not JSON, not an object, or an object with none of the members above.

SSE details: comment lines (``:``) and other fields (``event:``, ``id:``, ``retry:``) are skipped;
a blank line ends an event; several ``data:`` lines of one event are joined with ``\\n`` (an event
that is complete JSON on its first line is dispatched at once, which is what every LLM server
sends); ``data: [DONE]`` ends the stream.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

ChunkKind = Literal["content", "empty", "usage", "error", "malformed"]

_MAX_ERROR_CHARS = 160
_raw_decode = json.JSONDecoder().raw_decode
_JSON_SPACE = " \t\n\r"


def _loads(raw: bytes) -> Any:
    """``json.loads`` for UTF-8 bytes, minus its encoding sniffing and whitespace regexes.

    The hot path (one call per chunk). Raises ``ValueError`` (``JSONDecodeError`` or
    ``UnicodeDecodeError``) on bad input, trailing garbage included, exactly as ``json.loads``.
    """
    text = raw.decode("utf-8")
    if text[:1] in _JSON_SPACE:
        text = text.lstrip(_JSON_SPACE)  # "" too: raw_decode then raises
    obj, end = _raw_decode(text)
    if end != len(text) and text[end:].strip(_JSON_SPACE):
        raise json.JSONDecodeError("Extra data", text, end)
    return obj


def short_text(value: Any, limit: int = _MAX_ERROR_CHARS) -> str:
    """One line, at most ``limit`` characters: for the ``error`` column and failure messages."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_message(obj: Mapping[str, Any]) -> str | None:
    """The server's error text when ``obj`` is an error object, else None."""
    err = obj.get("error")
    if err is not None:
        if isinstance(err, dict):
            return short_text(err.get("message") or err)
        return short_text(err)
    if obj.get("object") == "error":
        return short_text(obj.get("message") or obj)
    return None


def _delta_has_content(delta: Mapping[str, Any]) -> bool:
    return bool(
        delta.get("content")
        or delta.get("reasoning_content")
        or delta.get("reasoning")
        or delta.get("tool_calls")
    )


def _choice_has_content(choice: Any) -> bool:
    if not isinstance(choice, dict):
        return False
    delta = choice.get("delta")
    if isinstance(delta, dict):
        return _delta_has_content(delta)
    message = choice.get("message")  # a whole (non-streamed) chat response
    if isinstance(message, dict):
        return _delta_has_content(message)
    return bool(choice.get("text"))


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as the server reported them (either may be missing)."""

    prompt_tokens: int | None
    completion_tokens: int | None
    #: prompt tokens the server found in its prefix cache (``usage.prompt_tokens_details
    #: .cached_tokens``: OpenAI, vLLM with --enable-prompt-tokens-details; llama.cpp's
    #: ``timings.cache_n``); None when the server does not say
    cached_tokens: int | None = None


def _cached(obj: Mapping[str, Any], usage: Mapping[str, Any]) -> int | None:
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and details.get("cached_tokens") is not None:
        return _int_or_none(details.get("cached_tokens"))
    timings = obj.get("timings")  # llama.cpp sends both; older builds only timings.cache_n
    return _int_or_none(timings.get("cache_n")) if isinstance(timings, dict) else None


def extract_usage(obj: Mapping[str, Any]) -> Usage | None:
    """``usage`` (OpenAI) or, failing that, llama.cpp's ``timings``; None when neither."""
    usage = obj.get("usage")
    if isinstance(usage, dict):
        return Usage(
            _int_or_none(usage.get("prompt_tokens")),
            _int_or_none(usage.get("completion_tokens")),
            _cached(obj, usage),
        )
    timings = obj.get("timings")
    if isinstance(timings, dict) and ("prompt_n" in timings or "predicted_n" in timings):
        return Usage(
            _int_or_none(timings.get("prompt_n")),
            _int_or_none(timings.get("predicted_n")),
            _int_or_none(timings.get("cache_n")),
        )
    return None


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def classify(obj: Any) -> tuple[ChunkKind, int]:
    """Kind of one decoded event and how many of its choices carry content."""
    if not isinstance(obj, dict):
        return "malformed", 0
    if error_message(obj) is not None:
        return "error", 0
    choices = obj.get("choices")
    if isinstance(choices, list):
        n = 0
        for choice in choices:
            if _choice_has_content(choice):
                n += 1
        if n:
            return "content", n
        return ("usage" if "usage" in obj or "timings" in obj else "empty"), 0
    if choices is None and ("usage" in obj or "timings" in obj):
        return "usage", 0
    return "malformed", 0


class StreamParser:
    """Accumulates one SSE response: content chunk stamps, usage, [DONE], errors, bad chunks."""

    __slots__ = (
        "_pending",
        "_server_usage",
        "_timings_usage",
        "chunks",
        "content_times",
        "done",
        "error",
        "malformed",
        "malformed_count",
    )

    def __init__(self) -> None:
        self.content_times: list[float] = []  # perf_counter of each content-bearing event
        self.chunks = 0  # content-bearing choice deltas (≈ tokens when usage is missing)
        self.done = False  # data: [DONE] seen
        self.error: str | None = None  # first error object's message
        self.malformed: str | None = None  # first malformed event, shortened
        self.malformed_count = 0
        self._server_usage: Usage | None = None
        self._timings_usage: Usage | None = None
        self._pending: bytes | None = None  # data of an event not yet complete JSON

    def is_done(self) -> bool:
        """``data: [DONE]`` seen (a callable for the stream reader)."""
        return self.done

    @property
    def usage(self) -> Usage | None:
        return self._server_usage or self._timings_usage

    def feed_line(self, line: bytes, t: float) -> None:
        """One line as read (trailing ``\\n``/``\\r\\n`` allowed), stamped ``t``."""
        line = line.rstrip(b"\r\n")
        if not line:
            self._flush_pending()
            return
        if line.startswith(b"data:"):
            payload = line[6:] if line[5:6] == b" " else line[5:]
            if payload == b"[DONE]":
                self._flush_pending()
                self.done = True
                return
            self._data(payload, t)
        # comments (":") and other SSE fields are not data

    def finish(self) -> None:
        """End of the body: an event left half-read is malformed."""
        self._flush_pending()

    def _data(self, payload: bytes, t: float) -> None:
        pending = self._pending
        if pending is not None:
            try:
                obj = _loads(pending + b"\n" + payload)
            except ValueError:
                try:
                    obj = _loads(payload)
                except ValueError:
                    self._pending = pending + b"\n" + payload
                    return
                self._bad(pending)  # the earlier fragment never became JSON
            self._pending = None
        else:
            try:
                obj = _loads(payload)
            except ValueError:
                self._pending = payload
                return
        self._dispatch(obj, payload, t)

    def _dispatch(self, obj: Any, raw: bytes, t: float) -> None:
        # fast path: one choice with a content delta and nothing else (almost every chunk)
        if type(obj) is dict and "error" not in obj and "usage" not in obj:
            choices = obj.get("choices")
            if type(choices) is list and len(choices) == 1:
                choice = choices[0]
                delta = choice.get("delta") if type(choice) is dict else None
                if type(delta) is dict and delta.get("content") and obj.get("object") != "error":
                    self.content_times.append(t)
                    self.chunks += 1
                    return
        kind, n = classify(obj)
        if kind == "content":
            self.content_times.append(t)
            self.chunks += n
        elif kind == "error":
            if self.error is None:
                self.error = error_message(obj)
            return
        elif kind == "malformed":
            self._bad(raw)
            return
        usage = extract_usage(obj)
        if usage is not None:
            if "usage" in obj:
                self._server_usage = usage
            else:
                self._timings_usage = usage

    def _flush_pending(self) -> None:
        if self._pending is not None:
            self._bad(self._pending)
            self._pending = None

    def _bad(self, raw: bytes) -> None:
        self.malformed_count += 1
        if self.malformed is None:
            self.malformed = short_text(raw.decode("utf-8", "replace"), 80)


@dataclass(frozen=True, slots=True)
class BodyResult:
    """What a whole (non-streamed) JSON response held."""

    kind: ChunkKind
    chunks: int  # choices with content
    usage: Usage | None
    error: str | None


def parse_body(raw: bytes) -> BodyResult:
    """Parse a non-streamed response body (chat ``message`` or completions ``text``)."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return BodyResult("malformed", 0, None, short_text(raw.decode("utf-8", "replace"), 80))
    kind, n = classify(obj)
    if kind == "error":
        return BodyResult("error", 0, None, error_message(obj))
    if kind == "malformed":
        return BodyResult("malformed", 0, None, short_text(str(obj), 80))
    return BodyResult(kind, n, extract_usage(obj), None)
