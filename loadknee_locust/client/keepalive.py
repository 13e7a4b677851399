"""Learn which servers close a connection right after each response, and stop reusing theirs.

Why: llama.cpp's llama-server (cpp-httplib) answers every streamed request with
``Keep-Alive: timeout=5, max=100`` and then closes the connection ~20 µs after the last chunk.
The pool's liveness check before reuse usually sees that close; but under load the close can
arrive after the check, the next POST is written into the closing socket, and it fails with zero
response bytes. Its bytes went out, so the rule of ``reconnect`` forbids a resend (a server that
resets after reading would be counted twice), and the request became a ``connect_error`` row the
server never served: 23 of 233 requests in one llama-server sweep.

What we do: the first streamed response to each server is watched for a close for up to
:data:`FIRST_STREAM_WAIT_S` once it is measured (once per process: before any reuse, so nothing
races it); a socket the pool finds dead within :data:`QUICK_CLOSE_S` of getting it back from a
response, or a request that dies with zero response bytes on a reused socket, does the same. Any
of them marks the server (host, port) as one that closes after responses, for the process.
From then on a socket to that server is closed when its response ends instead of going back to
the pool, so every request gets a fresh connection, which is what the server enforces anyway.
The race is gone without any resend. An idle timeout (uvicorn's 5 s, nginx's 75 s) is not a
mark: only a close within :data:`QUICK_CLOSE_S` of the response, or a close of the first
streamed response.

The seam: the pool's ``return_socket`` (wrapped per pool instance) and the liveness check that
:func:`reconnect.check_liveness_without_yielding` installs, which reports each dead socket here.
"""

from __future__ import annotations

import contextlib
import logging
import time
import weakref
from typing import Any

import gevent.select

log = logging.getLogger(__name__)

#: a pooled socket found closed this soon after its response ended was closed by the server
#: because the response ended, not by an idle timeout (those are ≥ 5 s in every server we know)
QUICK_CLOSE_S = 1.0

_MARK = "_loadknee_closing_servers"
_STREAMED = "_loadknee_streamed_response"
#: how long the first streamed response's socket is watched for the server's close: llama-server
#: closes ~20 µs after the last chunk on an idle machine; this leaves room for a busy one, and a
#: server that keeps the connection costs this once per process
FIRST_STREAM_WAIT_S = 0.25


class ClosingServers:
    """The servers (connection host, port) seen closing connections right after responses, for
    one process's load (held by the prompt state), and the pools that consult it."""

    def __init__(self, first_stream_wait_s: float = FIRST_STREAM_WAIT_S) -> None:
        self._servers: set[tuple[str, int]] = set()
        #: servers whose first streamed response was watched for a close (once per process)
        self._watched: set[tuple[str, int] | None] = set()
        self.first_stream_wait_s = first_stream_wait_s
        #: socket → monotonic time its response ended and the pool got it back
        self._returned_at: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()

    def names(self) -> list[str]:
        """The marked servers as ``host:port`` (for run.json)."""
        return sorted(f"{host}:{port}" for host, port in self._servers)

    def closes_after_response(self, pool: Any) -> bool:
        return server_of(pool) in self._servers

    def mark(self, pool: Any, why: str) -> None:
        """Remember that ``pool``'s server closes connections after responses (logged once)."""
        server = server_of(pool)
        if server is None or server in self._servers:
            return
        self._servers.add(server)
        log.info(
            "loadknee: %s:%s closes each connection right after its response (%s); from now on "
            "every request to it opens a fresh connection, as the server requires",
            *server,
            why,
        )

    def note_dead_socket(self, pool: Any, sock: Any) -> None:
        """A pooled socket found closed: a close within :data:`QUICK_CLOSE_S` of the response
        marks the server."""
        returned = self._returned_at.get(sock)
        if returned is not None and time.monotonic() - returned <= QUICK_CLOSE_S:
            self.mark(pool, "an idle socket was closed just after the response")

    def expect_stream(self, pool: Any) -> None:
        """The next response on ``pool`` is streamed: if it is the first to this server, its
        socket is watched for a close when it comes back (see :meth:`install`)."""
        if server_of(pool) not in self._watched:
            setattr(pool, _STREAMED, True)

    def _closed_after_first_stream(self, pool: Any, sock: Any) -> bool:
        """For the first streamed response to a server only: wait up to ``first_stream_wait_s``
        (cooperatively; the response is already measured) for the server to close the socket."""
        if not getattr(pool, _STREAMED, False):
            return False
        setattr(pool, _STREAMED, False)
        server = server_of(pool)
        if server in self._watched:
            return False
        self._watched.add(server)
        try:
            readable, _, _ = gevent.select.select([sock], [], [], self.first_stream_wait_s)
        except (OSError, ValueError):  # already closed or unusable: not reusable either way
            return True
        return bool(readable)  # an idle socket turning readable is closed (or unusable)

    def install(self, pool: Any) -> None:
        """Wrap ``pool.return_socket``: stamp when each response ended, and close the socket
        instead of pooling it once the server is marked. Installing twice is a no-op; a pool
        without ``return_socket`` / ``release_socket`` keeps reusing sockets as before."""
        if getattr(pool, _MARK, None) is not None:
            return
        give_back = getattr(pool, "return_socket", None)
        drop = getattr(pool, "release_socket", None)
        if give_back is None or drop is None:
            return

        def return_socket(sock: Any) -> None:
            if self._closed_after_first_stream(pool, sock):
                self.mark(pool, "it closed the first streamed response's connection")
            if self.closes_after_response(pool):
                drop(sock)  # closes it and frees the pool slot: the next request connects afresh
                return
            # a socket type without weak references gets no stamp, so never marks its server
            with contextlib.suppress(TypeError):
                self._returned_at[sock] = time.monotonic()
            give_back(sock)

        pool.return_socket = return_socket
        setattr(pool, _MARK, self)


def server_of(pool: Any) -> tuple[str, int] | None:
    """The (host, port) a pool connects to (None when the library hides it)."""
    host = getattr(pool, "_connection_host", None)
    port = getattr(pool, "_connection_port", None)
    return (str(host), int(port)) if host is not None and port is not None else None


def note_dead_socket(pool: Any, sock: Any) -> None:
    """For the liveness check: report a dead pooled socket to the pool's registry, if any."""
    registry = getattr(pool, _MARK, None)
    if isinstance(registry, ClosingServers):
        registry.note_dead_socket(pool, sock)


def mark_closes_after_response(pool: Any, why: str) -> None:
    """For the resend rule: a written request died on a reused socket of ``pool``."""
    registry = getattr(pool, _MARK, None)
    if isinstance(registry, ClosingServers):
        registry.mark(pool, why)
