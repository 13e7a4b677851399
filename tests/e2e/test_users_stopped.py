"""A user stopped while its request is in flight still leaves that request's one row.

Locust kills a user that outlives ``--stop-timeout``. Killed while reading the stream, the request
was an ``incomplete`` row (an error against the server); killed while still waiting for the
response headers (a long prefill, a queue, a resend on a fresh socket), Locust's ``request()``
raised before any response object existed and the request vanished: the server had read it, the
files had no row. CI caught the second case as a resend counted in run.json that no row carried.
Both are now one ``cancelled`` row that says when it was cut; the analysis counts it nowhere.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Literal

import pytest

from tests.support.fake_llm_server import TOKEN, LoopbackServer, _event, _read_request
from tests.support.llm_locust import run_locust

Stall = Literal["before_headers", "mid_stream"]


class StallingServer(LoopbackServer):
    """Reads each request, counts it, then stalls: with no byte at all (``before_headers``) or
    after the headers and one token (``mid_stream``), until the test ends. Once ``expected``
    requests are in (each stalled where it should be), it makes the file ``arrived``: Locust
    quits on it, not on a clock (a 1-s ``-t`` starts from gevent's stale start-up time and can
    end a loaded run before its users send)."""

    def __init__(self, stall: Stall, expected: int, arrived: Path) -> None:
        self.stall = stall
        self.expected = expected
        self.arrived = arrived
        self.received = 0
        self._count = threading.Lock()
        self._done = threading.Event()
        super().__init__()

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        super().__exit__(*exc)

    def _handle(self, sock: socket.socket) -> None:
        try:
            _read_request(sock)
        except (OSError, ValueError):
            return
        if self.stall == "mid_stream":
            sock.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            ev = _event(TOKEN)
            sock.sendall(b"%x\r\n%s\r\n" % (len(ev), ev))
        with self._count:
            self.received += 1
            if self.received == self.expected:
                self.arrived.touch()
        self._done.wait(30)  # hold the connection open, silent, until the test is over


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stall", "reason", "status"),
    [
        ("before_headers", "user stopped before the response", None),
        ("mid_stream", "user stopped mid-request", 200),
    ],
)
def test_a_user_stopped_in_flight_leaves_its_row(
    tmp_path: Path, stall: Stall, reason: str, status: int | None
) -> None:
    arrived = tmp_path / "arrived"
    with StallingServer(stall, expected=2, arrived=arrived) as server:
        result = run_locust(
            tmp_path,
            server.url,
            ["Chat"],
            users=2,
            seconds=30,  # a backstop: the run quits once both requests are in
            extra=["--llm-model", "fake", "--llm-no-calibrate", "--stop-timeout", "1"],
            timeout_s=60,
            quit_when=arrived,
        )
        received = server.received
    assert result.returncode in (0, 1), result.output[-3000:]
    rows = result.rows
    assert received == 2, result.output[-3000:]  # each user's one request reached the server
    assert len(rows) == received, (rows, result.output[-3000:])  # and each is one row
    for row in rows:
        assert row["outcome"] == "cancelled", row
        assert row["error"] == reason, row
        assert row.get("http_status") == status, row
        assert row["e2e_ms"] >= 1000, row  # it waited through the stop timeout
    assert all(e["exception"] for e in result.events)  # Locust counts each as a failure
