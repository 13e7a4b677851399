"""Keep-alive servers that close connections: each request stays one row, and is never doubled.

A stdlib fake advertises ``Keep-Alive`` (never ``Connection: close``) and closes a connection when
the NEXT request arrives on it, after reading it, without answering. The request's bytes were
written and read, so the server may have processed it: the user must NOT resend it (that doubled
requests and hid resets); each such request is one ``connect_error`` row and
the server's count equals the rows. A resend happens only when the write itself failed (the
socket was found closed before the request was written): tested on a socket pair below.
"""

from __future__ import annotations

import errno
import json
import socket
import struct
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Literal

import pytest
from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError

from loadknee_locust.client.reconnect import is_dropped_before_response
from tests.support.fake_llm_server import TOKEN, LoopbackServer, _event, _read_request, _usage
from tests.support.llm_locust import run_locust
from tests.support.paths import PROGRAMS, SUPPORT

_LENGTHS = ("--llm-input-tokens", "32", "--llm-output-tokens", "4")  # what the fake reports
#: each run stops once this many rows are written (the asserts need at least 5 beside the one the
#: stop may cut); the run's length is only a backstop, so a busy machine that starts Locust slowly
#: still gets its rows (a fixed 2-s run wrote 4 on a loaded box and failed)
ENOUGH_EVENTS = 8
STOP_BACKSTOP_S = 30

Mode = Literal[
    "one_per_connection", "only_first_answered", "close_after_answer", "reset_after_answer"
]


class ClosingKeepAliveServer(LoopbackServer):
    """``one_per_connection``: every connection answers one request, then closes silently on the
    next. ``only_first_answered``: the first request ever is answered; every later one is not.
    ``close_after_answer``: every connection answers one request and closes right after it, as
    llama-server does (while still advertising ``Keep-Alive``). ``reset_after_answer``: the same,
    with a reset (RST) instead of a FIN, so a later write on that socket fails."""

    def __init__(self, mode: Mode) -> None:
        self.mode = mode
        self.received = 0  # generation requests that reached the server
        self.answered = 0
        self._lock = threading.Lock()
        super().__init__()

    def _handle(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        answered_here = 0
        try:
            while True:
                try:
                    _read_request(sock)
                except (OSError, ValueError):
                    return
                with self._lock:
                    self.received += 1
                    answer = answered_here == 0 and (
                        self.mode != "only_first_answered" or self.answered == 0
                    )
                    self.answered += answer
                if not answer:
                    return  # close without a byte: the client's pooled socket is now stale
                answered_here += 1
                _stream(sock)
                if self.mode == "reset_after_answer":
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                if self.mode in ("close_after_answer", "reset_after_answer"):
                    return
        finally:
            sock.close()


def _stream(sock: socket.socket) -> None:
    sock.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        b"Keep-Alive: timeout=5, max=100\r\n\r\n"
    )
    events = [_event(TOKEN)] * 4 + [_event(_usage(32, 4)), _event(b"[DONE]")]
    for ev in events:
        sock.sendall(b"%x\r\n%s\r\n" % (len(ev), ev))
    sock.sendall(b"0\r\n\r\n")


def _cut_by_the_stop(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """The row the run's end cut, if any: only the last, outcome ``cancelled``, saying so.

    Locust runs a user whose wait ends as the stop is queued, so the kill can land in its next
    request; that request is one ``cancelled`` row and may or may not have reached the server.
    """
    cut = [r for r in rows if r["outcome"] == "cancelled"]
    assert cut in ([], rows[-1:]), cut
    assert all(str(r["error"]).startswith("user stopped") for r in cut), cut
    return cut


def _assert_served_once(server: ClosingKeepAliveServer, rows: list[dict[str, object]]) -> None:
    """Each row reached the server once (never resent); the stop's cut row may not have."""
    cut = _cut_by_the_stop(rows)
    assert len(rows) - len(cut) <= server.received <= len(rows), (server.received, len(rows))


def _run(tmp_path: Path, server: ClosingKeepAliveServer):  # type: ignore[no-untyped-def]
    return run_locust(
        tmp_path,
        server.url,
        ["Chat"],
        seconds=STOP_BACKSTOP_S,
        extra=[*("--llm-model", "fake", "--llm-no-calibrate"), *_LENGTHS],
        stop_after_events=ENOUGH_EVENTS,
    )


@pytest.mark.slow
def test_a_request_the_server_read_then_dropped_is_one_row_never_resent(tmp_path: Path) -> None:
    with ClosingKeepAliveServer("one_per_connection") as server:
        result = _run(tmp_path, server)
    done = result.rows[:-1]  # the last one may have been cut by the stop
    outcomes = Counter(r["outcome"] for r in done)
    assert len(done) >= 5, result.output[-3000:]
    # the second request dies on the reused socket (one honest row, never resent); it teaches the
    # user that this server closes after each response, so every later request connects afresh
    assert [r["outcome"] for r in done[:2]] == ["ok", "connect_error"], outcomes
    assert outcomes["connect_error"] == 1 and outcomes["ok"] == len(done) - 1, outcomes
    assert result.rows[-1]["outcome"] in ("ok", "incomplete", "cancelled"), result.rows[-1]
    assert result.info.get("stale_connection_retries", 0) == 0
    assert result.info["servers_closing_after_response"] == [server.url.removeprefix("http://")]
    assert len({r["request_id"] for r in result.rows}) == len(result.rows)
    _assert_served_once(server, result.rows)


@pytest.mark.slow
def test_a_server_that_closes_after_each_answer_loses_no_request(tmp_path: Path) -> None:
    """llama-server's pattern: a close right after each streamed answer. The close is seen by the
    check before reuse (or, if the next request raced it, by that one failure), and from then on
    no socket to this server is reused: nothing is lost to the race."""
    with ClosingKeepAliveServer("close_after_answer") as server:
        result = _run(tmp_path, server)
    outcomes = Counter(r["outcome"] for r in result.rows[:-1])
    assert sum(outcomes.values()) >= 5, result.output[-3000:]
    assert outcomes["connect_error"] <= 1, outcomes  # at most the one request that taught it
    assert all(r["outcome"] == "ok" for r in result.rows[2:-1]), outcomes
    assert result.info["servers_closing_after_response"] == [server.url.removeprefix("http://")]
    assert result.info.get("stale_connection_retries", 0) == 0
    _assert_served_once(server, result.rows)


@pytest.mark.slow
def test_a_resent_request_that_fails_again_is_one_connect_error(tmp_path: Path) -> None:
    with ClosingKeepAliveServer("only_first_answered") as server:
        result = _run(tmp_path, server)
    cut = _cut_by_the_stop(result.rows)  # the run's end may cut the last request: cancelled
    outcomes = [r["outcome"] for r in result.rows[: len(result.rows) - len(cut)]]
    assert outcomes[0] == "ok", result.output[-3000:]
    assert len(outcomes) >= 3 and set(outcomes[1:]) == {"connect_error"}, outcomes
    # the failures happened after the request was written: never resent
    assert result.info.get("stale_connection_retries", 0) == 0
    _assert_served_once(server, result.rows)
    json.dumps(result.info)  # run.json-ready


@pytest.mark.slow
def test_a_request_whose_write_failed_is_resent_once_and_its_row_says_so(tmp_path: Path) -> None:
    """The one resend: the reused socket was reset before the request was written (the race made
    certain by ``resend_race_locustfile.py``). The row is ok and carries ``resent`` 1; the server
    saw each request once."""
    with ClosingKeepAliveServer("reset_after_answer") as server:
        result = run_locust(
            tmp_path,
            server.url,
            ["Chat"],
            seconds=STOP_BACKSTOP_S,
            extra=[*("--llm-model", "fake", "--llm-no-calibrate"), *_LENGTHS],
            locustfile=SUPPORT / "resend_race_locustfile.py",
            stop_after_events=ENOUGH_EVENTS,
        )
    done = result.rows[:-1]  # the last one may have been cut by the stop
    assert len(done) >= 4, result.output[-3000:]
    assert {r["outcome"] for r in done} == {"ok"}, Counter(r["outcome"] for r in done)
    # the first request had a fresh socket; every later one found its reused socket reset
    assert [r["resent"] for r in done] == [0] + [1] * (len(done) - 1)
    # every resend is on a row, the one the stop cut too (it was stopped during its resend once)
    assert result.info["stale_connection_retries"] == sum(r["resent"] for r in result.rows)
    # a resent request reached the server once; a last one the stop killed before its response
    # is a row that says so, and may or may not have reached it
    _assert_served_once(server, result.rows)


@pytest.mark.parametrize(
    ("exc", "resend"),
    [
        (HTTPConnectionClosed("connection closed."), True),  # zero response bytes
        (OSError(errno.EPIPE, "Broken pipe"), True),  # only a send raises it
        (OSError(errno.ECONNRESET, "Connection reset by peer"), True),
        (HTTPParseError("connection closed before end of the headers"), False),  # bytes came
        (OSError(errno.ECONNREFUSED, "Connection refused"), False),  # never connected
        (TimeoutError("timed out"), False),  # the server may be working on it
        (TimeoutError(), False),
        (ValueError("bug"), False),
    ],
)
def test_only_a_silent_close_is_resent(exc: BaseException, resend: bool) -> None:
    assert is_dropped_before_response(exc) is resend


_LIVENESS_SCRIPT = PROGRAMS / "liveness_check.py"


def test_the_reuse_check_gives_the_same_answer_without_a_greenlet_switch() -> None:
    """Under monkey-patching, geventhttpclient's liveness check yields (gevent's select sleeps 0);
    ours answers the same without yielding (a switch between the start stamp and the send)."""
    proc = subprocess.run(
        [sys.executable, str(_LIVENESS_SCRIPT)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # [alive, yielded] for the idle socket, the closed one, then the idle one at fd 1100
    before, after = result["before"], result["after"]
    assert before[:2] == [[True, True], [False, True]]  # the library: right, but yields
    assert after[:2] == [[True, False], [False, False]]  # ours: right, no switch
    if len(before) == 3:  # the descriptor limit could be raised past 1100
        assert before[2][0] is False  # select() refuses fd ≥ 1024: a live socket called dead
        assert after[2] == [True, False]


def test_a_write_is_tracked_as_complete_or_failed() -> None:
    """The resend rule's evidence: ``sendall`` done (never resend) or failed (may resend)."""
    import gevent.socket

    from loadknee_locust.client.reconnect import _track_writes, was_written

    a, b = gevent.socket.socketpair()
    try:
        assert was_written(a) is None  # untracked: the rule never resends
        _track_writes(a)
        a.sendall(b"POST / HTTP/1.1\r\n\r\n")
        assert was_written(a) is True
        b.close()
        with pytest.raises(OSError):
            for _ in range(100):  # the first write after the close may still be accepted
                a.sendall(b"x" * 65536)
        assert was_written(a) is False
    finally:
        a.close()
