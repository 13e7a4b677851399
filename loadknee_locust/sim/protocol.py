"""OpenAI request parsing and response shapes for the simulator (pure: no I/O, no engine).

Parsing turns a request body into a :class:`.engine.GenerationSpec` plus the stream flags, or
raises :class:`ApiError` (rendered in OpenAI's ``{"error": {...}}`` shape). Builders render SSE
chunks the way vLLM does: chat starts with a role-only chunk (``{"role": "assistant",
"content": ""}``), each token is its own chunk, the last token's chunk carries ``finish_reason``,
``stream_options.include_usage`` adds a final ``choices: []`` chunk with ``usage``, then
``data: [DONE]``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from loadknee_locust.sim.engine import GenerationSpec
from loadknee_locust.sim.params import SimParams
from loadknee_locust.sim.prefixcache import block_hashes
from loadknee_locust.sim.tokenizer import chat_tokens, count_chat_tokens, count_tokens, tokenize

Endpoint = Literal["chat", "completions"]
DONE = b"data: [DONE]\n\n"


class ApiError(Exception):
    """An error answered in OpenAI's JSON shape; ``outcome`` goes to the sim log."""

    def __init__(
        self, status: int, message: str, *, kind: str = "BadRequestError", outcome: str = "bad"
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.outcome = outcome

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": None,
                          "code": self.status}}  # fmt: skip


@dataclass(frozen=True)
class ParsedRequest:
    spec: GenerationSpec
    stream: bool
    include_usage: bool
    model: str


def _int_field(body: Mapping[str, Any], name: str, *, minimum: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ApiError(400, f"{name} must be an integer ≥ {minimum}, got {value!r}")
    return value


def _prompt_lengths(endpoint: Endpoint, body: Mapping[str, Any], params: SimParams) -> list[int]:
    if endpoint == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "messages must be a non-empty list")
        try:
            return [
                count_chat_tokens(
                    messages,
                    per_message=params.chat_tokens_per_message,
                    constant=params.chat_tokens_constant,
                )
            ]
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return [count_tokens(prompt)]
    if isinstance(prompt, list) and prompt:
        if all(isinstance(p, str) for p in prompt):
            return [count_tokens(p) for p in prompt]
        if all(isinstance(p, int) and not isinstance(p, bool) for p in prompt):
            return [len(prompt)]
        if all(isinstance(p, list) and all(isinstance(t, int) for t in p) for p in prompt):
            return [len(p) for p in prompt]
    raise ApiError(400, "prompt must be a string, a list of strings or token-id list(s)")


def _prompt_blocks(
    endpoint: Endpoint, body: Mapping[str, Any], params: SimParams
) -> tuple[tuple[int, ...], ...]:
    """Each prompt's block hashes for the prefix cache (the body is already validated)."""
    size = params.block_size
    if endpoint == "chat":
        tokens = chat_tokens(body["messages"], per_message=params.chat_tokens_per_message,
                             constant=params.chat_tokens_constant)  # fmt: skip
        return (block_hashes(tokens, size),)
    prompt = body["prompt"]
    if isinstance(prompt, str):
        return (block_hashes(tokenize(prompt), size),)
    if all(isinstance(p, str) for p in prompt):
        return tuple(block_hashes(tokenize(p), size) for p in prompt)
    if all(isinstance(p, int) for p in prompt):
        return (block_hashes([str(t) for t in prompt], size),)
    return tuple(block_hashes([str(t) for t in p], size) for p in prompt)


def parse_request(endpoint: Endpoint, body: Any, params: SimParams) -> ParsedRequest:
    """Validate a request body against the OpenAI shape and the model's limits."""
    if not isinstance(body, Mapping):
        raise ApiError(400, "the request body must be a JSON object")
    model = body.get("model") or params.model
    if model != params.model:
        raise ApiError(
            404, f"The model `{model}` does not exist.", kind="NotFoundError", outcome="bad"
        )
    prompts = _prompt_lengths(endpoint, body, params)
    max_tokens = _int_field(body, "max_tokens", minimum=1)
    if max_tokens is None and endpoint == "chat":
        max_tokens = _int_field(body, "max_completion_tokens", minimum=1)
    min_tokens = _int_field(body, "min_tokens", minimum=0) or 0
    longest = max(prompts)
    if max_tokens is None:
        max_tokens = max(1, params.max_model_len - longest)
    if longest + max_tokens > params.max_model_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {params.max_model_len} tokens. However, "
            f"you requested {longest + max_tokens} tokens ({longest} in the messages, "
            f"{max_tokens} in the completion). Please reduce the length of the messages or "
            "completion.",
            outcome="too_long",
        )
    if min_tokens > max_tokens:
        raise ApiError(400, f"min_tokens ({min_tokens}) must be ≤ max_tokens ({max_tokens})")
    if body.get("n", 1) != 1:
        raise ApiError(400, "n > 1 is not simulated; send a list of prompts for a batch")
    stream = bool(body.get("stream", False))
    options = body.get("stream_options")
    if options is not None and not stream:
        raise ApiError(400, "Stream options can only be defined when `stream=True`.")
    include_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
    spec = GenerationSpec(
        prompt_tokens=tuple(prompts),
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        ignore_eos=bool(body.get("ignore_eos", False)),
        prompt_blocks=_prompt_blocks(endpoint, body, params)
        if params.enable_prefix_caching
        else (),
    )
    return ParsedRequest(spec, stream, include_usage, model)


def usage(
    prompt_tokens: int, completion_tokens: int, cached_tokens: int | None = None
) -> dict[str, Any]:
    """OpenAI's usage object; with ``cached_tokens`` (prefix caching on) also
    ``prompt_tokens_details.cached_tokens``, as vLLM with --enable-prompt-tokens-details."""
    out: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return out


class Renderer:
    """Builds one request's response bodies and SSE chunks (bytes, ready to write)."""

    def __init__(self, endpoint: Endpoint, model: str) -> None:
        self.endpoint = endpoint
        self.chat = endpoint == "chat"
        prefix = "chatcmpl-" if self.chat else "cmpl-"
        self.id = prefix + uuid.uuid4().hex
        self.created = int(time.time())
        self.model = model
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        self._head = (
            f'data: {{"id":"{self.id}","object":"{kind}","created":{self.created},'
            f'"model":{json.dumps(model)},"choices":'
        )

    def role_chunk(self, index: int) -> bytes:
        return (
            self._head + f'[{{"index":{index},"delta":{{"role":"assistant","content":""}},'
            '"logprobs":null,"finish_reason":null}]}\n\n'
        ).encode()

    def token_chunk(self, index: int, text: str, finish_reason: str | None) -> bytes:
        finish = "null" if finish_reason is None else f'"{finish_reason}"'
        piece = json.dumps(text)
        body = f'"delta":{{"content":{piece}}}' if self.chat else f'"text":{piece}'
        return (
            self._head
            + f'[{{"index":{index},{body},"logprobs":null,"finish_reason":{finish}}}]}}\n\n'
        ).encode()

    def usage_chunk(
        self, prompt_tokens: int, completion_tokens: int, cached_tokens: int | None = None
    ) -> bytes:
        body = json.dumps(usage(prompt_tokens, completion_tokens, cached_tokens))
        return (self._head + f'[],"usage":{body}}}\n\n').encode()

    def full_response(
        self, texts: list[str], finish_reasons: list[str | None], prompt_tokens: int,
        completion_tokens: int, cached_tokens: int | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        if self.chat:
            choices: list[dict[str, Any]] = [
                {"index": i, "message": {"role": "assistant", "content": text},
                 "logprobs": None, "finish_reason": reason}
                for i, (text, reason) in enumerate(zip(texts, finish_reasons, strict=True))
            ]  # fmt: skip
        else:
            choices = [
                {"index": i, "text": text, "logprobs": None, "finish_reason": reason}
                for i, (text, reason) in enumerate(zip(texts, finish_reasons, strict=True))
            ]
        return {
            "id": self.id,
            "object": "chat.completion" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": choices,
            "usage": usage(prompt_tokens, completion_tokens, cached_tokens),
        }
