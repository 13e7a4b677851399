"""Retry a request once on a fresh connection when a reused keep-alive socket was already dead.

Why: some servers (llama.cpp's llama-server / cpp-httplib) advertise ``Keep-Alive`` but close the
connection just after a streamed response ends. The pool's liveness check (a zero-timeout
``select``) runs before the close arrives, the next POST goes out on the dying socket and fails
with ``HTTPConnectionClosed`` before a single response byte. geventhttpclient never retries a POST
(RFC 9110 §9.2.2: it may have been processed), so every such request became a ``connect_error``.

What we do, as urllib3 (``is_connection_dropped`` + retry) and Go's ``net/http``
(``errServerClosedIdle``) do for this exact case: a request is sent once more on a fresh
connection only when it provably never reached the server: it went out on a REUSED pooled
socket, failed with "connection closed" / reset / broken pipe before ANY response byte, AND its
bytes were never all written (the write itself failed: the socket was found closed before the
request was written). Once ``sendall`` returned, the server may have read and processed the
request (a server that resets after reading it was counted twice and its resets hidden: 490
doubled requests of 2684), so such a failure is reported, never resent. Never retried either: a
failure on a fresh socket, a failure after the status line arrived (a cut stream is read outside
``_urlopen`` and never reaches this code), timeouts, refused connections. One retry at most, so
a server that keeps closing connections still gives one failure, no loop. The pool's liveness
check just before reuse (:func:`check_liveness_without_yielding`, no greenlet switch in between)
is what catches an idle socket the server closed; this resend covers the write that raced it.
A server that closes every connection right after its response (llama-server) is learned from
those checks and failures, and its sockets are then never reused (``keepalive``): no race left.

The seam is the narrowest one Locust offers: the user agent's ``_urlopen`` (one HTTP exchange
without redirects), wrapped per instance; sockets are told fresh from reused by counting the
connection pool's ``_create_socket`` calls, and a socket the pool creates is given a subclass
whose ``sendall`` records whether the request's bytes all went out (gevent's socket methods are
read-only attributes; its class can be swapped for a slot-less subclass). The caller's
``on_retry`` counts resends (for run.json).
"""

from __future__ import annotations

import contextlib
import errno
import select
import weakref
from collections.abc import Callable
from typing import Any

from gevent.monkey import get_original
from geventhttpclient.response import HTTPConnectionClosed

from loadknee_locust.client.ghc_internals import missing, warn_missing
from loadknee_locust.client.keepalive import mark_closes_after_response, note_dead_socket

_MARK = "_loadknee_stale_retry"
_QUICK = "_loadknee_quick_liveness"
_POLL_EVENTS = (
    select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP
    if hasattr(select, "poll")
    else 0
)
try:  # the system calls, never a greenlet switch; poll has no 1024-descriptor ceiling
    _REAL_POLL: Any = get_original("select", "poll")
except AttributeError:  # no poll (Windows): select, as the library does
    _REAL_POLL = None
_REAL_SELECT = get_original("select", "select")
_CREATED = "_loadknee_sockets_created"


def is_dropped_before_response(exc: BaseException) -> bool:
    """True for the errors that mean "the server closed this connection before answering":
    ``HTTPConnectionClosed`` (raised only when zero response bytes arrived, ECONNRESET included)
    and EPIPE / ECONNRESET (from the send). Timeouts and refused connections are not. Whether
    the request may be resent also needs its write to have failed (see the module docstring)."""
    if isinstance(exc, HTTPConnectionClosed):
        return True
    return isinstance(exc, OSError) and exc.errno in (errno.EPIPE, errno.ECONNRESET)


#: socket → True once a ``sendall`` on it returned (its last request's bytes all went out),
#: False while one is in progress or after one failed
_WRITTEN: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_TRACKING: dict[type, type] = {}
#: set on those subclasses: the stream reader treats one as its base class (receive stamps)
WRITE_TRACKING_MARK = "_loadknee_write_tracking"


def _tracking_class(base: type) -> type:
    """A slot-less subclass of ``base`` whose ``sendall`` records completion in ``_WRITTEN``."""
    cls = _TRACKING.get(base)
    if cls is None:

        def sendall(self: Any, data: Any, flags: int = 0) -> Any:
            _WRITTEN[self] = False
            result = base.sendall(self, data, flags)  # type: ignore[attr-defined]
            _WRITTEN[self] = True
            return result

        attrs = {"__slots__": (), "sendall": sendall, WRITE_TRACKING_MARK: True}
        cls = type(base.__name__, (base,), attrs)
        _TRACKING[base] = cls
    return cls


def _track_writes(sock: Any) -> Any:
    if getattr(type(sock), WRITE_TRACKING_MARK, False):
        return sock  # tracked already: a subclass of the tracking class would hide the socket
        # type the receive stamps look for (streamread._stampable), and stamps would be lost
    # a socket class that forbids the swap (not gevent's) stays untracked: never resent
    with contextlib.suppress(TypeError):
        sock.__class__ = _tracking_class(type(sock))
    return sock


def was_written(sock: Any) -> bool | None:
    """True when the last ``sendall`` on ``sock`` completed; None when it is not tracked."""
    if sock is None or type(sock) not in _TRACKING.values():
        return None
    return _WRITTEN.get(sock)


def _count_created(pool: Any) -> int | None:
    """Sockets ``pool`` has created so far (instrumenting it on first use); None if unknown."""
    count = getattr(pool, _CREATED, None)
    if count is not None:
        return int(count)
    create = getattr(pool, "_create_socket", None)
    get_socket = getattr(pool, "get_socket", None)
    if create is None or get_socket is None:
        return None

    def counting_create(*args: Any, **kwargs: Any) -> Any:
        setattr(pool, _CREATED, getattr(pool, _CREATED, 0) + 1)
        return _track_writes(create(*args, **kwargs))

    def remembering_get_socket(*args: Any, **kwargs: Any) -> Any:
        sock = get_socket(*args, **kwargs)
        pool._loadknee_last_socket = sock  # one request at a time per user (and pool)
        return sock

    pool.get_socket = remembering_get_socket

    pool._create_socket = counting_create
    setattr(pool, _CREATED, 0)
    return 0


def _drop_idle_sockets(pool: Any) -> None:
    """Close the pool's idle sockets: they may be as stale as the one that just failed."""
    queue = getattr(pool, "_socket_queue", None)
    while queue is not None and not queue.empty():
        try:
            queue.get(block=False).close()
        except Exception:  # an empty queue or an already closed socket: nothing to drop
            break


def _pool_of(agent: Any, request: Any) -> Any:
    """The connection pool ``request`` goes through (None when the library hides it: then every
    failure before a response byte is resent once, as if the socket had been reused)."""
    try:
        return getattr(agent.clientpool.get_client(request.url_split), "_connection_pool", None)
    except AttributeError:
        return None


def install_stale_retry(agent: Any, on_retry: Callable[[], None] | None = None) -> None:
    """Wrap ``agent._urlopen`` (a geventhttpclient ``UserAgent``, e.g. ``FastHttpSession.client``)
    so a request that died on a reused, already closed socket is sent once more on a fresh one.
    Installing twice is a no-op. An agent without ``_urlopen`` (a geventhttpclient that renamed
    it) keeps its plain path, with one warning per process: a user that cannot resend still
    measures; a user that fails to start measures nothing."""
    if getattr(agent, _MARK, False):
        return
    absent = missing(agent, ("_urlopen",))
    if absent:
        fallback = "requests are not resent on stale sockets"
        warn_missing(type(agent).__name__, tuple(absent), fallback)
        return
    inner = agent._urlopen

    def _urlopen(request: Any) -> Any:
        pool = _pool_of(agent, request)
        created_before = _count_created(pool)
        if pool is not None:
            pool._loadknee_last_socket = None
        try:
            return inner(request)
        except Exception as exc:
            if not is_dropped_before_response(exc):
                raise
            if created_before is None:
                raise  # sockets not tracked: whether it reached the server is unknown
            if _count_created(pool) != created_before:
                raise  # it failed on a fresh connection: a real error, reported as such
            if was_written(getattr(pool, "_loadknee_last_socket", None)) is not False:
                # its bytes went out: the server may have processed it; never resent. A reused
                # socket closed under a written request: stop reusing this server's sockets
                mark_closes_after_response(pool, "a request written to a reused socket failed")
                raise
        if on_retry is not None:
            on_retry()
        _drop_idle_sockets(pool)
        return inner(request)

    agent._urlopen = _urlopen
    setattr(agent, _MARK, True)


def check_liveness_without_yielding(pool: Any) -> None:
    """Make ``pool``'s check of an idle socket before reuse a plain zero-timeout ``select``.

    geventhttpclient checks every pooled socket with ``select.select([sock], [], [], 0)``; under
    Locust that is gevent's select, which after the very same zero-timeout system call does
    ``gevent.sleep(0)`` so that no greenlet monopolises the loop. Here it sits between the
    request's start stamp and its first byte: with 64 streams the greenlet queued behind every
    other stream's pending chunk and its request went out 2.8 ms (median) after it was stamped.
    A closed-loop user waits for its response right after anyway, so the yield buys nothing.
    Same check, same answer (readable while idle = closed or dirty), per pool instance, once;
    with ``poll`` where there is one, because ``select`` refuses descriptors ≥ 1024 and the
    library's check then calls every idle socket dead (1000+ users in one process would
    reconnect on every request).
    """
    if getattr(pool, _QUICK, False) or not hasattr(pool, "_is_socket_alive"):
        return

    def is_socket_alive(sock: Any) -> bool:
        alive = _is_idle_and_open(sock)
        if not alive and sock is not None:
            note_dead_socket(pool, sock)  # closed right after its response? (keepalive.py)
        return alive

    pool._is_socket_alive = is_socket_alive
    setattr(pool, _QUICK, True)


def _is_idle_and_open(sock: Any) -> bool:
    """The library's check of an idle pooled socket (nothing readable = still open), made with
    the real zero-timeout ``poll`` (or ``select``), so it never switches greenlets."""
    if sock is None:
        return False
    try:
        fd = sock.fileno()
        if fd < 0:
            return False
        if _REAL_POLL is None:
            readable, _, _ = _REAL_SELECT([fd], [], [], 0.0)
            return not readable
        poller = _REAL_POLL()
        poller.register(fd, _POLL_EVENTS)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False
