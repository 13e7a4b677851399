"""An independent OpenAI-style server that refuses instead of queueing (TGI's
``--max-concurrent-requests``): while ``limit`` requests are in it, the next one gets HTTP 429
``{"error": "Model is overloaded"}`` at once. Not the simulator: the refusal tests must not lean
on code the analysis was tuned against.

aiohttp on its own event loop in a thread, port 0, loopback. Every admitted request takes the
same time (``prefill_s`` then ``chunks`` content chunks ``chunk_s`` apart), so throughput grows
linearly up to the limit and the only limit is the refusal. A request leaves the count *before*
its last event is written, so a client that sends its next request on ``[DONE]`` never meets
its own previous request still counted (``limit`` users are never refused).

``metrics=True`` adds a simulator-style ``/metrics`` (``vllm:num_requests_running`` and
``vllm:num_requests_waiting``, always 0: nothing queues here).
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, Self

from aiohttp import web

from loadknee_locust.sim.tokenizer import count_chat_tokens, count_tokens

OVERLOADED = {"error": "Model is overloaded", "error_type": "overloaded"}


class RefusingServer:
    """``with RefusingServer(limit=10) as srv: srv.url``; ``srv.refused`` / ``srv.served`` count."""

    def __init__(
        self,
        *,
        limit: int,
        metrics: bool = False,
        prefill_s: float = 0.03,
        chunks: int = 8,
        chunk_s: float = 0.04,
    ) -> None:
        self.limit = limit
        self.metrics = metrics
        self.prefill_s, self.chunks, self.chunk_s = prefill_s, chunks, chunk_s
        self.in_flight = 0
        self.peak = 0  # the most requests admitted at once
        self.served = 0
        self.refused = 0
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def __enter__(self) -> Self:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_post("/v1/chat/completions", self._generate)
        app.router.add_post("/v1/completions", self._generate)
        if self.metrics:
            app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "refusing"}]})

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _metrics(self, request: web.Request) -> web.Response:
        text = (
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{model_name="refusing"}} {self.in_flight}\n'
            "# TYPE vllm:num_requests_waiting gauge\n"
            'vllm:num_requests_waiting{model_name="refusing"} 0\n'
        )
        return web.Response(text=text, content_type="text/plain")

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        body: dict[str, Any] = await request.json()
        if self.in_flight >= self.limit:
            self.refused += 1
            return web.json_response(OVERLOADED, status=429)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        counted = True
        try:
            prompt = _prompt_tokens(body)
            completion = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
            await asyncio.sleep(self.prefill_s)
            if not body.get("stream"):
                await asyncio.sleep(self.chunk_s * self.chunks)
                self.in_flight -= 1
                counted = False
                self.served += 1
                return web.json_response(_whole(body, prompt, completion))
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            chat = "messages" in body
            words = _split(completion, self.chunks)
            await resp.write(_event({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}))
            for n in words:
                await asyncio.sleep(self.chunk_s)
                text = " w" * n
                choice = {"index": 0, "delta": {"content": text}} if chat else {"text": text}
                await resp.write(_event({"choices": [choice]}))
            self.in_flight -= 1  # before the last events: see the module docstring
            counted = False
            self.served += 1
            usage = {"prompt_tokens": prompt, "completion_tokens": completion}
            await resp.write(_event({"choices": [], "usage": usage}))
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp
        finally:
            if counted:
                self.in_flight -= 1


def _prompt_tokens(body: dict[str, Any]) -> int:
    if "messages" in body:
        return count_chat_tokens(body["messages"], per_message=4, constant=3)
    prompt = body.get("prompt", "")
    return count_tokens(prompt if isinstance(prompt, str) else " ".join(map(str, prompt)))


def _split(total: int, parts: int) -> list[int]:
    parts = max(1, min(parts, total))
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _whole(body: dict[str, Any], prompt: int, completion: int) -> dict[str, Any]:
    text = " w" * completion
    choice: dict[str, Any] = (
        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
        if "messages" in body
        else {"index": 0, "text": text, "finish_reason": "length"}
    )
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    return {"choices": [choice], "usage": usage}


def _event(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"
