"""A tiny misbehaving OpenAI-style server (stdlib sockets + threads, port 0) for failure tests.

Each request gets the next behaviour from a fixed cycle (``BEHAVIOURS``), so one short sequential
Locust run meets every failure kind; ``served`` maps the client's ``X-Request-Id`` to the
behaviour it got. Streams are chunked, one ``sendall`` per SSE event with TCP_NODELAY, and every
response closes the connection.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from typing import Self

BEHAVIOURS = (
    "ok",
    "http_500",
    "cut",
    "malformed",
    "stream_error",
    "empty",
    "slow",
    "drop",
    "short_usage",
    "no_usage",
)

TOKEN = {"choices": [{"index": 0, "delta": {"content": " w"}}]}


def _usage(prompt: int, completion: int) -> dict:
    return {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}


def _event(obj: object) -> bytes:
    payload = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return b"data: " + payload + b"\n\n"


class LoopbackServer:
    """A threaded TCP server on 127.0.0.1 that hands each connection's socket to ``_handle``:
    ``with Sub(...) as srv: srv.url``. Subclasses set their state, then ``super().__init__()``."""

    def __init__(self) -> None:
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                outer._handle(self.request)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handle(self, sock: socket.socket) -> None:
        raise NotImplementedError


class FakeLLMServer(LoopbackServer):
    """``with FakeLLMServer(prompt_tokens=..., completion_tokens=...) as srv: srv.url``"""

    def __init__(self, *, prompt_tokens: int, completion_tokens: int, slow_s: float = 2.0) -> None:
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.slow_s = slow_s
        self.served: dict[str, str] = {}
        self.headers_seen: list[dict[str, str]] = []  # of generation requests, lower-case keys
        self._count = 0
        self._lock = threading.Lock()
        super().__init__()

    def _next(self, rid: str) -> str:
        with self._lock:
            behaviour = BEHAVIOURS[self._count % len(BEHAVIOURS)]
            self._count += 1
            self.served[rid] = behaviour
        return behaviour

    def _handle(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            head, body = _read_request(sock)
        except (OSError, ValueError):
            return
        if head.startswith("GET /v1/models"):
            _send_json(sock, 200, {"data": [{"id": "fake"}]})
            return
        rid = _header(head, "x-request-id") or "?"
        self.headers_seen.append(
            {
                k.strip().lower(): v.strip()
                for k, _, v in (line.partition(":") for line in head.split("\r\n")[1:])
            }
        )
        stream = bool(json.loads(body or b"{}").get("stream"))
        behaviour = self._next(rid)
        try:
            if stream:
                self._stream(sock, behaviour)
            else:
                self._whole(sock, behaviour)
        except OSError:
            pass  # the client gave up (timeout test)
        finally:
            sock.close()

    def _events(self, behaviour: str) -> Iterator[bytes]:
        n = self.completion_tokens
        yield _event({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        if behaviour == "empty":
            yield _event({"choices": []})
            yield _event(b"[DONE]")
            return
        for i in range(n):
            if behaviour == "cut" and i == 2:
                return
            if behaviour == "malformed" and i == 1:
                yield _event(b'{"choices": [ {broken')
            if behaviour == "stream_error" and i == 1:
                yield _event({"error": {"message": "engine died", "code": 500}})
                yield _event(b"[DONE]")
                return
            if behaviour == "slow" and i == 1:
                time.sleep(self.slow_s)
            yield _event(TOKEN)
        short = 1 if behaviour == "short_usage" else 0  # counts one token fewer than asked
        if behaviour != "no_usage":
            yield _event(_usage(self.prompt_tokens, n - short))
        yield _event(b"[DONE]")

    def _stream(self, sock: socket.socket, behaviour: str) -> None:
        if behaviour == "drop":
            return  # close without any response
        if behaviour == "http_500":
            _send_json(sock, 500, {"error": {"message": "internal trouble", "code": 500}})
            return
        sock.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        for ev in self._events(behaviour):
            sock.sendall(b"%x\r\n%s\r\n" % (len(ev), ev))
        if behaviour != "cut":
            sock.sendall(b"0\r\n\r\n")

    def _whole(self, sock: socket.socket, behaviour: str) -> None:
        if behaviour == "drop":
            return
        if behaviour == "http_500":
            _send_json(sock, 500, {"error": {"message": "internal trouble"}})
        elif behaviour == "malformed":
            _send_raw(sock, 200, b"<html>not json</html>")
        elif behaviour == "empty":
            _send_json(sock, 200, {"choices": []})
        elif behaviour == "stream_error":
            _send_json(sock, 200, {"error": {"message": "engine died"}})
        else:
            if behaviour == "slow":
                time.sleep(self.slow_s)
            short = 1 if behaviour == "short_usage" else 0
            usage = _usage(self.prompt_tokens, self.completion_tokens - short)["usage"]
            if behaviour == "no_usage":
                usage = None
            msg = {"role": "assistant", "content": " w" * self.completion_tokens}
            _send_json(sock, 200, {"choices": [{"index": 0, "message": msg}], "usage": usage})


def _read_request(sock: socket.socket) -> tuple[str, bytes]:
    sock.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ValueError("closed")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    text = head.decode("latin-1")
    length = int(_header(text, "content-length") or 0)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return text, body


def _header(head: str, name: str) -> str | None:
    for line in head.split("\r\n")[1:]:
        key, _, value = line.partition(":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def _send_raw(sock: socket.socket, status: int, body: bytes) -> None:
    sock.sendall(
        b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
        b"Connection: close\r\n\r\n%s" % (status, len(body), body)
    )


def _send_json(sock: socket.socket, status: int, obj: object) -> None:
    _send_raw(sock, status, json.dumps(obj).encode())
