"""A plain asyncio client for measuring the simulator (tests and the benchmark), not for users:
it lives with the test tooling so that the product ships no code only its tests run.

:func:`stream_request` sends one streaming request and keeps every SSE chunk with its arrival
time; :func:`closed_loop` runs ``concurrency`` clients back to back for a while and counts the
content chunks (one per token) that arrive inside the measured window, so throughput does not
depend on where request boundaries fall.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


@dataclass
class StreamResult:
    status: int
    chunks: list[dict[str, Any]] = field(default_factory=list)
    chunk_times: list[float] = field(default_factory=list)  # monotonic, per chunk
    done: bool = False  # saw data: [DONE]
    body: Any = None  # the JSON body of a non-200 answer

    @property
    def content_chunks(self) -> list[dict[str, Any]]:
        return [c for c in self.chunks if content_of(c)]

    @property
    def text(self) -> str:
        return "".join(content_of(c) for c in self.chunks)

    @property
    def usage(self) -> dict[str, int] | None:
        return next((c["usage"] for c in self.chunks if c.get("usage")), None)


def content_of(chunk: dict[str, Any]) -> str:
    """The generated text a chunk carries ("" for role-only and usage chunks)."""
    text = ""
    for choice in chunk.get("choices") or []:
        text += choice.get("text") or (choice.get("delta") or {}).get("content") or ""
    return text


def prompt_of(tokens: int) -> str:
    """A completions prompt of exactly ``tokens`` tokens under the simulator's tokenizer."""
    return " ".join(["w"] * tokens)


async def stream_request(
    session: aiohttp.ClientSession,
    url: str,
    body: dict[str, Any],
    *,
    endpoint: str = "completions",
    headers: dict[str, str] | None = None,
    on_chunk: Any = None,
) -> StreamResult:
    """POST ``body`` with ``stream: true``; read SSE to the end (or until the server stops)."""
    async with session.post(url + PATHS[endpoint], json={**body, "stream": True},
                            headers=headers) as response:  # fmt: skip
        result = StreamResult(response.status)
        if response.status != 200:
            result.body = await response.json(content_type=None)
            return result
        async for raw in response.content:
            line = raw.strip()
            if not line.startswith(b"data: "):
                continue
            if line == b"data: [DONE]":
                result.done = True
                continue
            chunk = json.loads(line[6:])
            now = time.monotonic()
            result.chunks.append(chunk)
            result.chunk_times.append(now)
            if on_chunk is not None:
                on_chunk(chunk, now)
        return result


@dataclass(frozen=True)
class LoopResult:
    concurrency: int
    window_s: float
    tokens: int  # content chunks that arrived in the window
    requests_failed: int

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.window_s


async def closed_loop(
    url: str,
    *,
    concurrency: int,
    input_tokens: int,
    output_tokens: int,
    warmup_s: float = 0.5,
    window_s: float = 2.0,
    endpoint: str = "completions",
) -> LoopResult:
    """``concurrency`` clients send back-to-back streaming requests; count tokens in the window."""
    if endpoint == "chat":
        payload: dict[str, Any] = {
            "messages": [{"role": "user", "content": prompt_of(input_tokens)}]
        }
    else:
        payload = {"prompt": prompt_of(input_tokens)}
    payload.update(max_tokens=output_tokens, ignore_eos=True)
    start = time.monotonic()
    lo, hi = start + warmup_s, start + warmup_s + window_s
    counts = {"tokens": 0, "failed": 0}

    def on_chunk(chunk: dict[str, Any], now: float) -> None:
        if lo <= now < hi and content_of(chunk):
            counts["tokens"] += 1

    async def client(session: aiohttp.ClientSession) -> None:
        while time.monotonic() < hi:
            try:
                result = await stream_request(session, url, payload, endpoint=endpoint,
                                              on_chunk=on_chunk)  # fmt: skip
                if result.status != 200 or not result.done:
                    counts["failed"] += 1
            except aiohttp.ClientError:
                counts["failed"] += 1

    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        tasks = [asyncio.create_task(client(session)) for _ in range(concurrency)]
        await asyncio.sleep(max(0.0, hi - time.monotonic()))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return LoopResult(concurrency, window_s, counts["tokens"], counts["failed"])
