"""The keep-alive rule: which servers are learned to close after responses, and what changes then.

Real gevent socket pairs stand in for a pooled connection; the pool is a small object with the
two methods and two attributes of geventhttpclient's ``ConnectionPool`` the rule uses (the real
pool is exercised end to end in ``test_users_realserver_keepalive.py``).
"""

from __future__ import annotations

import time
from typing import Any

import gevent.socket
import pytest

from loadknee_locust.client import keepalive
from loadknee_locust.client.keepalive import ClosingServers


class _Pool:
    def __init__(self, port: int = 8000) -> None:
        self._connection_host = "127.0.0.1"
        self._connection_port = port
        self.pooled: list[Any] = []
        self.released: list[Any] = []

    def return_socket(self, sock: Any) -> None:
        self.pooled.append(sock)

    def release_socket(self, sock: Any) -> None:
        self.released.append(sock)
        sock.close()


@pytest.fixture
def pair() -> Any:
    a, b = gevent.socket.socketpair()
    yield a, b
    a.close()
    b.close()


def _installed(wait_s: float = 0.05) -> tuple[ClosingServers, _Pool]:
    servers, pool = ClosingServers(first_stream_wait_s=wait_s), _Pool()
    servers.install(pool)
    return servers, pool


def test_a_close_right_after_the_first_stream_marks_the_server(pair: Any) -> None:
    client, server_side = pair
    servers, pool = _installed()
    servers.expect_stream(pool)
    server_side.close()  # the server closes as its streamed answer ends
    pool.return_socket(client)
    assert servers.names() == ["127.0.0.1:8000"]
    assert pool.released == [client] and pool.pooled == []  # not pooled: the next one is fresh


def test_a_server_that_keeps_the_connection_is_watched_once_and_reused(pair: Any) -> None:
    client, _ = pair
    servers, pool = _installed(wait_s=0.05)
    servers.expect_stream(pool)
    started = time.monotonic()
    pool.return_socket(client)
    servers.expect_stream(pool)
    pool.return_socket(client)
    assert time.monotonic() - started < 0.09  # the second stream was not watched again
    assert servers.names() == [] and pool.pooled == [client, client]


def test_a_non_streamed_response_is_not_watched(pair: Any) -> None:
    client, server_side = pair
    servers, pool = _installed()
    server_side.close()
    pool.return_socket(client)  # no expect_stream: returned as the library would
    assert servers.names() == [] and pool.pooled == [client]


@pytest.mark.parametrize(("age_s", "marked"), [(0.0, True), (0.5, True), (5.0, False)])
def test_a_dead_idle_socket_marks_only_when_it_died_soon_after_its_response(
    pair: Any, monkeypatch: pytest.MonkeyPatch, age_s: float, marked: bool
) -> None:
    client, _ = pair
    servers, pool = _installed()
    pool.return_socket(client)
    later = time.monotonic() + age_s
    monkeypatch.setattr(keepalive.time, "monotonic", lambda: later)
    keepalive.note_dead_socket(pool, client)  # what the liveness check reports
    assert (servers.names() == ["127.0.0.1:8000"]) is marked


def test_a_written_request_dying_on_a_reused_socket_marks_the_server() -> None:
    servers, pool = _installed()
    keepalive.mark_closes_after_response(pool, "a request written to a reused socket failed")
    assert servers.names() == ["127.0.0.1:8000"]
    other = _Pool(port=9000)
    servers.install(other)
    assert not servers.closes_after_response(other)  # per server, not for every host


def test_a_pool_without_a_registry_is_left_alone(pair: Any) -> None:
    pool = _Pool()
    keepalive.note_dead_socket(pool, pair[0])
    keepalive.mark_closes_after_response(pool, "x")
    assert not hasattr(pool, "_loadknee_closing_servers")
