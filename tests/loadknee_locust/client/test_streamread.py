"""The stream reader against a scripted server on loopback: stamps, timeout, cut bodies.

The server (stdlib threads) answers each connection with a script of (pause, bytes) steps after
the request's headers, so the tests control exactly when every byte goes out; the client is
geventhttpclient, as under Locust, in this process's gevent hub.
"""

from __future__ import annotations

import itertools
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import gevent.ssl
import pytest
from geventhttpclient import HTTPClient

from loadknee_locust.client import streamread
from loadknee_locust.client.sse import StreamParser

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
TOKEN = b'data: {"choices":[{"index":0,"delta":{"content":" w"}}]}\n\n'
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%d}}\n\n'
DONE = b"data: [DONE]\n\n"
END = b"0\r\n\r\n"
CLOSE = b""  # a script step that closes the connection
#: (pause in seconds, or an event the server waits for, then the bytes it sends)
Script = Sequence[tuple[float | threading.Event, bytes]]


def chunk(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


def stream_script(tokens: int, gap_s: float) -> Script:
    steps = [(0.0, HEAD)] + [(gap_s, chunk(TOKEN)) for _ in range(tokens)]
    return [*steps, (0.0, chunk(USAGE % tokens)), (0.0, chunk(DONE)), (0.0, END)]


class ScriptedServer:
    """Plays ``script`` for every request (keep-alive); ``sent[i]``: ``time.time()`` after step i
    (of all requests, in order); ``accepted``: connections so far. ``gated``: after the script's
    first step (the head) each response waits for :attr:`gate` (set by :func:`read` once the
    client holds the head), so that no body can arrive inside the head's read."""

    def __init__(
        self, script: Script, tls: ssl.SSLContext | None = None, *, gated: bool = False
    ) -> None:
        self.script = script
        self.tls = tls
        self.gated = gated
        self.gate = threading.Event()
        self.sent: list[float] = []
        self.before: list[float] = []  # time.time() before each step's send
        self.accepted = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            threading.Thread(target=self._play, args=(conn,), daemon=True).start()

    def _play(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            try:
                while _read_request_head(conn):
                    for step, (pause, payload) in enumerate(self.script):
                        if step == 1 and self.gated:
                            self.gate.wait(10)
                            self.gate.clear()
                        if isinstance(pause, threading.Event):
                            pause.wait(10)
                        else:
                            time.sleep(pause)
                        if payload == CLOSE:
                            return
                        self.before.append(time.time())
                        conn.sendall(payload)
                        self.sent.append(time.time())
            except OSError:
                return  # the client gave up

    def close(self) -> None:
        self._listener.close()


def _read_request_head(conn: socket.socket) -> bool:
    """Read one request's head (the tests send tiny bodies in the same segment); False at EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = conn.recv(4096)
        if not more:
            return False
        data += more
    return True


@contextmanager
def served(script: Script, *, gated: bool = False) -> Iterator[tuple[ScriptedServer, HTTPClient]]:
    server = ScriptedServer(script, gated=gated)
    client = HTTPClient("127.0.0.1", server.port, network_timeout=5, connection_timeout=5)
    streamread.stamp_new_sockets(client._connection_pool)  # as LLMUser does for its host
    try:
        yield server, client
    finally:
        client.close()
        server.close()


def read(server: ScriptedServer, client: HTTPClient, timeout: float = 5.0, *, after_s: float = 0.0):
    """POST, let a gated ``server`` send the body, optionally sleep (blocking: the bytes pile up
    unread), read; (parser, done, t0).

    Also checks the reader took the path this platform and the monkeypatched switch allow. The
    body is gated (``served(..., gated=True)``): on a loaded machine a body sent 10 ms after the
    head arrived whole inside the head's read, and the reader rightly said "with_headers" (ci80:
    ``test_a_body_ending_without_done_returns_none[True]``)."""
    resp = client.post("/v1/chat/completions", body=b"{}")
    server.gate.set()
    time.sleep(after_s)
    parser = StreamParser()
    t0 = time.perf_counter()
    done, mode = streamread.read_stream(resp, parser.feed_line, parser.is_done, timeout)
    parser.finish()
    kernel = streamread.KERNEL_STAMPS and streamread.kernel_stamps_work()
    assert mode == ("kernel" if kernel else "readline")
    return parser, done, t0


needs_kernel_stamps = pytest.mark.skipif(
    not (streamread.KERNEL_STAMPS and streamread.kernel_stamps_work()),
    reason="no kernel receive stamps here (Linux-only; some sandboxes drop them)",
)


@needs_kernel_stamps
def test_stamps_are_arrival_times_not_read_times() -> None:
    # the whole response arrives in ~50 ms; the client reads it 400 ms later
    with served(stream_script(5, 0.01), gated=True) as (server, client):
        parser, done, t0 = read(server, client, after_s=0.4)
    assert parser.done and parser.chunks == 5 and parser.usage.completion_tokens == 5
    assert done is not None
    # on the perf_counter timeline: `done` ≈ when [DONE] left the server, ~0.35 s before t0
    wall_minus_perf = time.time() - time.perf_counter()
    done_wall = done + wall_minus_perf
    assert abs(done_wall - server.sent[-2]) < 0.005, (done_wall, server.sent)
    assert t0 - done > 0.3


def test_without_kernel_stamps_lines_are_stamped_when_read(monkeypatch) -> None:
    monkeypatch.setattr(streamread, "KERNEL_STAMPS", False)
    with served(stream_script(5, 0.01), gated=True) as (server, client):
        parser, done, t0 = read(server, client, after_s=0.3)
    assert parser.done and parser.chunks == 5 and parser.usage.completion_tokens == 5
    assert done is not None and done >= t0
    assert all(t >= t0 for t in parser.content_times)


@pytest.mark.parametrize("kernel", [True, False])
def test_gaps_shorter_than_the_timeout_never_time_out(monkeypatch, kernel: bool) -> None:
    # 8 tokens 0.15 s apart = 1.2 s in all, with a 0.4 s read timeout (the lazy timer re-arms)
    if not kernel:
        monkeypatch.setattr(streamread, "KERNEL_STAMPS", False)
    with served(stream_script(8, 0.15), gated=True) as (server, client):
        parser, done, t0 = read(server, client, timeout=0.4)
    assert parser.done and parser.chunks == 8
    assert done is not None and done - t0 > 1.1
    # each token stamped on its own arrival: the gaps are the server's own between its sends
    # (steps 1-8 of the script; a busy box may hold two sends together, and then both stamps)
    gaps = [b - a for a, b in zip(parser.content_times, parser.content_times[1:], strict=False)]
    tokens = server.sent[1:9]
    sends = [b - a for a, b in itertools.pairwise(tokens)]
    assert max(abs(g - s) for g, s in zip(gaps, sends, strict=True)) < 0.05, (gaps, sends)
    assert sum(gaps) > 0.9  # ... and spread over the stream, not stamped together at its end


@pytest.mark.parametrize("kernel", [True, False])
def test_silence_longer_than_the_timeout_is_a_timeout(monkeypatch, kernel: bool) -> None:
    if not kernel:
        monkeypatch.setattr(streamread, "KERNEL_STAMPS", False)
    script = [(0.0, HEAD), (0.0, chunk(TOKEN)), (0.2, chunk(TOKEN)), (3.0, chunk(TOKEN))]
    with served(script) as (_server, client):
        resp = client.post("/v1/chat/completions", body=b"{}")
        parser = StreamParser()
        t0 = time.perf_counter()
        with pytest.raises(TimeoutError):
            streamread.read_stream(resp, parser.feed_line, parser.is_done, 0.5)
        waited = time.perf_counter() - t0
    assert parser.chunks == 2
    assert 0.65 <= waited < 1.5  # 0.5 s after the second token, not after the first


@pytest.mark.parametrize("kernel", [True, False])
def test_a_body_cut_mid_chunk_raises_and_keeps_what_came(monkeypatch, kernel: bool) -> None:
    if not kernel:
        monkeypatch.setattr(streamread, "KERNEL_STAMPS", False)
    script = [(0.0, HEAD), (0.0, chunk(TOKEN)), (0.01, chunk(TOKEN)[:20]), (0.0, CLOSE)]
    with served(script) as (_server, client):
        resp = client.post("/v1/chat/completions", body=b"{}")
        parser = StreamParser()
        with pytest.raises(Exception) as info:
            streamread.read_stream(resp, parser.feed_line, parser.is_done, 2.0)
    assert type(info.value).__name__ in {"HTTPConnectionClosed", "HTTPParseError"}
    assert parser.chunks == 1 and not parser.done


@pytest.mark.parametrize("kernel", [True, False])
def test_a_body_ending_without_done_returns_none(monkeypatch, kernel: bool) -> None:
    if not kernel:
        monkeypatch.setattr(streamread, "KERNEL_STAMPS", False)
    script = [(0.0, HEAD), (0.0, chunk(TOKEN)), (0.01, chunk(TOKEN)), (0.0, END)]
    with served(script, gated=True) as (server, client):
        parser, done, _t0 = read(server, client)
    assert done is None and parser.chunks == 2 and not parser.done


@pytest.mark.parametrize("kernel", [True, False])
def test_after_done_the_body_is_read_to_its_end_and_the_socket_reused(
    monkeypatch, kernel: bool
) -> None:
    if not kernel:
        monkeypatch.setattr(streamread, "KERNEL_STAMPS", False)
    trailing = chunk(b": a comment after [DONE]\n\n")
    script = stream_script(3, 0.0)
    script = [*script[:-1], (0.05, trailing), (0.0, END)]
    with served(script, gated=True) as (server, client):
        for _ in range(2):  # the second request rides the first one's connection
            parser, done, _t0 = read(server, client)
            assert parser.done and parser.chunks == 3 and done is not None
    assert server.accepted == 1  # one connection served both: the body was read to its end


def test_modes() -> None:
    class Bare:
        _sock = socket.socket()  # a stdlib socket, not gevent's: no kernel path

    try:
        assert streamread.stamping_mode(Bare()) == "readline"
    finally:
        Bare._sock.close()
    # the body waits for the test: one sent with the headers completes the response inside
    # their read, which lets its socket go (a loaded machine did: "readline" for "kernel")
    body = threading.Event()
    head, *rest = stream_script(1, 0.0)
    with served([head, (body, rest[0][1]), *rest[1:]]) as (_server, client):
        resp = client.post("/v1/chat/completions", body=b"{}")
        expected = "kernel" if streamread.kernel_stamps_work() else "readline"
        assert streamread.stamping_mode(resp) == expected
        body.set()
        resp.read()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl for a test certificate")
def test_tls_streams_take_the_readline_path(tmp_path) -> None:
    """TLS buffers decrypted bytes the file descriptor cannot show: never the kernel path."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = ScriptedServer(stream_script(4, 0.01), tls=context)

    def trusting_context(**_kw: object) -> ssl.SSLContext:
        tls = gevent.ssl.create_default_context()
        tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE  # our throwaway certificate
        return tls

    client = HTTPClient(
        "127.0.0.1", server.port, ssl=True, insecure=True, ssl_context_factory=trusting_context
    )
    try:
        resp = client.post("/v1/chat/completions", body=b"{}")
        assert streamread.stamping_mode(resp) == "readline"
        parser = StreamParser()
        done, mode = streamread.read_stream(resp, parser.feed_line, parser.is_done, 5.0)
    finally:
        client.close()
        server.close()
    assert mode == "readline" and done is not None
    assert parser.done and parser.chunks == 4 and parser.usage.completion_tokens == 4


def test_a_body_that_came_with_the_headers_says_so() -> None:
    """Nothing is left to read (the socket is already back in the pool): not a fallback."""
    whole = HEAD + chunk(TOKEN) + chunk(USAGE % 1) + chunk(DONE) + END
    with served([(0.0, whole)]) as (_server, client):
        resp = client.post("/v1/chat/completions", body=b"{}")
        time.sleep(0.05)
        parser = StreamParser()
        done, mode = streamread.read_stream(resp, parser.feed_line, parser.is_done, 5.0)
    assert parser.done and parser.chunks == 1
    assert done is not None and mode in ("with_headers", "kernel")  # kernel: a split arrival


@needs_kernel_stamps
def test_parsing_a_big_read_does_not_move_its_stamp_earlier() -> None:
    """900 chunks and [DONE] in one send: the stamp stays at or after the send began, however
    long the parser takes over them (the clock is read before the parser runs)."""
    burst = b"".join(chunk(TOKEN) for _ in range(900)) + chunk(USAGE % 900) + chunk(DONE) + END
    with served([(0.0, HEAD), (0.2, burst)], gated=True) as (server, client):
        parser, done, _t0 = read(server, client, after_s=0.4)
    assert parser.done and parser.chunks == 900 and done is not None
    done_wall = done + (time.time() - time.perf_counter())
    assert done_wall >= server.before[-1] - 0.0001, (done_wall - server.before[-1]) * 1000
    assert done_wall <= server.sent[-1] + 0.002


def test_a_socket_tracked_twice_keeps_its_stamps() -> None:
    """The resend's write tracking applied twice to one socket keeps one tracking class over
    gevent's socket, so the receive-stamp path still recognises it (a nested subclass did not)."""
    import gevent.socket

    from loadknee_locust.client.reconnect import _track_writes

    sock = gevent.socket.socket()
    try:
        _track_writes(sock)
        first = type(sock)
        _track_writes(sock)
        assert type(sock) is first and first.__bases__ == (gevent.socket.socket,)
        assert streamread._stampable(sock) == (
            streamread.KERNEL_STAMPS and streamread.kernel_stamps_work()
        )
    finally:
        sock.close()
