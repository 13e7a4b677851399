"""The simulator's HTTP side (aiohttp): OpenAI endpoints, health, metrics and test controls.

Routes: ``POST /v1/chat/completions``, ``POST /v1/completions``, ``GET /v1/models``,
``GET /health`` (503 while restarting), ``GET /metrics``, ``GET /sim/log[?last=N]``,
``GET /sim/stats``, and ``POST /sim/crash`` (only with ``allow_control``). With ``--no-metrics``
``/metrics`` answers 404, as an API gateway or a server started without metrics does.

Streaming writes each SSE chunk the moment its token exists (one ``write`` per chunk, TCP_NODELAY,
no compression). A crash ends an open stream without ``data: [DONE]`` (the chunked body is closed
normally, so clients see a stream that stops early) and answers a non-streaming request with 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web
from aiohttp.tcp_helpers import tcp_nodelay

from loadknee_locust.sim import metrics, protocol
from loadknee_locust.sim.engine import Engine, QueueFull, Request, Unavailable
from loadknee_locust.sim.faults import ERROR_EVENT, HTTP_FAULTS, MALFORMED_EVENT, FaultPicker
from loadknee_locust.sim.params import SimParams
from loadknee_locust.sim.simlog import SimLog, SimOutcome, SimRecord

CLIENT_GONE = (ConnectionResetError, ConnectionError)


class SimServer:
    """Owns the engine, the sim log and the metrics registry of one simulated server."""

    def __init__(self, params: SimParams, *, allow_control: bool = False) -> None:
        self.params = params
        self.allow_control = allow_control
        self.registry = metrics.build_registry()
        self.engine = Engine(params, metrics.LatencyHistograms(self.registry, params.model))
        self.registry.register(metrics.EngineCollector(self.engine))
        self.log = SimLog()
        self.faults = FaultPicker(
            params.fault, params.fault_share, params.seed, params.fault_above_in_flight
        )
        #: the load's requests (those with a client id) being handled now, for the fault threshold
        self._load_in_flight = 0

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/sim/log", self._sim_log)
        app.router.add_get("/sim/stats", self._sim_stats)
        app.router.add_post("/sim/crash", self._sim_crash)
        app.cleanup_ctx.append(self._engine_task)
        return app

    async def _engine_task(self, app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(self.engine.run(), name="sim-engine")
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    # -- small endpoints ------------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        p = self.params
        model = {"id": p.model, "object": "model", "created": 0, "owned_by": "vllm",
                 "max_model_len": p.max_model_len}  # fmt: skip
        return web.json_response({"object": "list", "data": [model]})

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.engine.up else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        if not self.params.metrics:  # --no-metrics: a server (or gateway) that exports none
            raise web.HTTPNotFound(text="404: Not Found")
        body = metrics.render(self.registry)
        return web.Response(body=body, headers={"Content-Type": metrics.CONTENT_TYPE})

    async def _sim_log(self, request: web.Request) -> web.Response:
        last = request.query.get("last")
        return web.json_response(self.log.as_json(int(last) if last else None))

    async def _sim_stats(self, request: web.Request) -> web.Response:
        e = self.engine
        return web.json_response({
            "outcomes": dict(self.log.outcomes),
            "preemptions": e.scheduler.preemptions_total,
            "restarts": e.restarts,
            "up": e.up,
            "running": e.scheduler.in_batch,
            "waiting": len(e.scheduler.waiting),
            "prompt_tokens_total": e.prompt_tokens_total,
            "generation_tokens_total": e.generation_tokens_total,
            "prefix_cache": metrics.prefix_cache_counts(e),
            "engine_loop": e.health.as_dict(),
            "params": self.params.as_dict(),
        })  # fmt: skip

    async def _sim_crash(self, request: web.Request) -> web.Response:
        if not self.allow_control:
            raise web.HTTPNotFound(text="start the simulator with --allow-control")
        self.engine.request_crash()
        return web.json_response({"crashing": True})

    # -- generation -----------------------------------------------------------------------
    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "chat")

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "completions")

    async def _generate(
        self, request: web.Request, endpoint: protocol.Endpoint
    ) -> web.StreamResponse:
        is_load = "X-Request-Id" in request.headers
        self._load_in_flight += is_load
        try:
            return await self._generate_counted(request, endpoint, is_load)
        finally:
            self._load_in_flight -= is_load

    async def _generate_counted(
        self, request: web.Request, endpoint: protocol.Endpoint, is_load: bool
    ) -> web.StreamResponse:
        arrival = time.time()
        rid = request.headers.get("X-Request-Id") or uuid.uuid4().hex
        stream = False

        fault = self.faults.pick(has_client_id=is_load, in_flight=self._load_in_flight)

        def record(status: int, outcome: SimOutcome, job: Request | None = None) -> None:
            if fault is not None:
                outcome = "faulted"
            self.log.add(SimRecord(
                request_id=rid, endpoint=endpoint, stream=stream, status=status, outcome=outcome,
                arrival_unix_s=arrival,
                first_token_unix_s=job.first_token_unix_s if job else None,
                end_unix_s=time.time(),
                prompt_tokens=job.prompt_tokens if job else None,
                completion_tokens=job.completion_tokens if job else None,
                preemptions=job.preemptions if job else 0, fault=fault or "",
                cached_tokens=job.cached_tokens if job else None,
            ))  # fmt: skip

        headers = {"X-Request-Id": rid}
        if fault == "reset_before_read":
            record(0, "faulted")
            return _reset(request)
        try:
            try:
                body = await request.json()
            except ValueError:
                raise protocol.ApiError(400, "the request body is not valid JSON") from None
            parsed = protocol.parse_request(endpoint, body, self.params)
            stream = parsed.stream
            if fault == "reset_after_read":
                record(0, "faulted")
                return _reset(request)
            if fault in HTTP_FAULTS:
                status = HTTP_FAULTS[fault]
                record(status, "faulted")
                error = protocol.ApiError(status, f"simulated {fault}", kind="SimulatedFault")
                return web.json_response(error.body(), status=status, headers=headers)
            if not stream and fault is not None:
                fault = None  # the stream faults need a stream: this request is served as is
            job = self.engine.submit(parsed.spec)
        except protocol.ApiError as exc:
            outcome: SimOutcome = "too_long" if exc.outcome == "too_long" else "bad_request"
            record(exc.status, outcome)
            return web.json_response(exc.body(), status=exc.status, headers=headers)
        except (QueueFull, Unavailable) as exc:
            status = self.params.reject_status if isinstance(exc, QueueFull) else 503
            kind = "RateLimitError" if status == 429 else "ServiceUnavailableError"
            record(status, "rejected")
            error = protocol.ApiError(status, str(exc), kind=kind)
            return web.json_response(error.body(), status=status, headers=headers)

        renderer = protocol.Renderer(endpoint, parsed.model)
        try:
            if stream:
                return await self._stream(request, job, renderer, parsed.include_usage, headers,
                                          record, fault)  # fmt: skip
            return await self._complete(request, job, renderer, headers, record)
        except (*CLIENT_GONE, asyncio.CancelledError):
            self.engine.abort(job)
            record(200, "aborted", job)
            raise

    def _cached(self, job: Request) -> int | None:
        """The usage's cached tokens: only with prefix caching on (vLLM reports them only when
        asked to, with --enable-prompt-tokens-details; off, the field is left out)."""
        return job.cached_tokens if self.params.enable_prefix_caching else None

    async def _stream(
        self, request: web.Request, job: Request, renderer: protocol.Renderer,
        include_usage: bool, headers: dict[str, str],
        record: Callable[[int, SimOutcome, Request | None], None], fault: str | None = None,
    ) -> web.StreamResponse:  # fmt: skip
        p = self.params
        response = web.StreamResponse(
            headers={**headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        if request.transport is not None:
            tcp_nodelay(request.transport, True)
        role_sent: set[int] = set()
        first_written = False
        tokens_written = 0
        if fault == "stall":
            await asyncio.sleep(p.fault_stall_s)
        while not job.cut:
            for event in await job.next_events():
                if fault == "trickle":
                    await asyncio.sleep(p.fault_trickle_s)
                if renderer.chat and event.index not in role_sent:
                    role_sent.add(event.index)
                    await response.write(renderer.role_chunk(event.index))
                await response.write(
                    renderer.token_chunk(event.index, event.text, event.finish_reason)
                )
                tokens_written += 1
                if not first_written:
                    job.first_token_unix_s = time.time()
                    first_written = True
                if tokens_written == 1 and fault == "malformed_sse":
                    await response.write(MALFORMED_EVENT)
                if (tokens_written == 1 and fault == "error_object") or (
                    tokens_written == 2 and fault == "cut_stream"
                ):
                    if fault == "error_object":
                        await response.write(ERROR_EVENT)
                    self.engine.abort(job)
                    await response.write_eof()
                    record(200, "faulted", job)
                    return response
            if job.drained:
                break
        if not job.cut:
            if include_usage:
                extra = 1 if fault == "wrong_usage" else 0
                chunk = renderer.usage_chunk(
                    job.prompt_tokens, job.completion_tokens + extra, self._cached(job)
                )
                await response.write(chunk)
            await response.write(protocol.DONE)
        await response.write_eof()
        record(200, "cut" if job.cut else "ok", job)
        return response

    async def _complete(
        self, request: web.Request, job: Request, renderer: protocol.Renderer,
        headers: dict[str, str],
        record: Callable[[int, SimOutcome, Request | None], None],
    ) -> web.Response:  # fmt: skip
        n = len(job.seqs)
        texts: list[list[str]] = [[] for _ in range(n)]
        reasons: list[str | None] = [None] * n
        while not job.cut and not job.drained:
            for event in await job.next_events():
                texts[event.index].append(event.text)
                reasons[event.index] = event.finish_reason
        if job.cut:
            error = protocol.ApiError(
                500, "engine crashed (simulated OOM)", kind="InternalServerError"
            )
            response = web.json_response(error.body(), status=500, headers=headers)
        else:
            body = renderer.full_response(["".join(t) for t in texts], reasons,
                                          job.prompt_tokens, job.completion_tokens,
                                          self._cached(job))  # fmt: skip
            response = web.json_response(body, headers=headers)
        # send it here rather than on return, so end_unix_s is when the last byte went out
        await response.prepare(request)
        await response.write_eof()
        record(response.status, "cut" if job.cut else "ok", job)
        return response


def _reset(request: web.Request) -> web.Response:
    """Reset the connection (RST, not FIN: SO_LINGER 0); the returned response goes nowhere."""
    transport = request.transport
    if transport is not None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    return web.Response(status=500)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket (``port`` 0 picks a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


async def serve(
    params: SimParams, sock: socket.socket, *, allow_control: bool = False,
    on_ready: Callable[[], Any] | None = None, stop: asyncio.Event | None = None,
) -> None:  # fmt: skip
    """Serve until ``stop`` is set (forever when None); clean shutdown on return."""
    server = SimServer(params, allow_control=allow_control)
    runner = web.AppRunner(server.app(), access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.SockSite(runner, sock, backlog=1024)
    await site.start()
    try:
        if on_ready is not None:
            on_ready()
        await (stop or asyncio.Event()).wait()
    finally:
        server.engine.shut_down()  # open streams end now instead of at the shutdown timeout
        await asyncio.sleep(0)
        await runner.cleanup()
