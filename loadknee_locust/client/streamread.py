"""Read a streamed (SSE) response off its socket, each line stamped with when it ARRIVED.

Why not ``resp.stream.readline``: at every decode step an engine hands one chunk to every stream
at once, and a single-threaded client works through them one after another (~40 µs each); with
64 streams the last of them was stamped ~3 ms after it had arrived (measured against the
simulator's clock: end-of-stream lag 3.1–3.4 ms, a plain aiohttp client 3.7 ms). The kernel knows
better: with ``SO_TIMESTAMPNS`` every ``recvmsg`` also returns the time the newest bytes it hands
over reached the socket. TCP merges queued segments and keeps the newest stamp, so a line read
together with later ones is stamped late by their gap, never later than the old stamp taken after
the read. One case runs the other way: when a retransmission fills a hole, the segments queued
behind it keep their own (earlier) stamps, so a stamp is also held at or after the previous read
that found the socket empty (the data cannot have been readable before it). Stamps are moved onto
the ``perf_counter`` timeline the rest of the request uses (``start`` is a ``perf_counter``).

It is also cheaper per token than ``readline``: one wait and one ``recvmsg`` per arrival (a
short read means the kernel had nothing more, so the next read waits first instead of failing
with EAGAIN), all complete lines split at once, and no gevent ``Timeout`` per wait. The read
timeout keeps its meaning (no byte for ``timeout`` seconds fails the request) through ONE lazy
timer per request, re-armed for the remainder when it fires while data is still flowing.

Used where it is exact: Linux (the option's number is the generic one, 35, on every architecture
Python wheels exist for except the four listed below), a plain TCP socket (TLS buffers decrypted
bytes the file descriptor cannot show) and geventhttpclient's response internals as in 2.6
(``_sock``, ``_body_buffer``, ``feed``, ``message_complete``, ``release``: listed in
``ghc_internals``, which a test checks against the installed library). Anywhere else
:func:`read_stream` falls back to the ``readline`` loop stamped with ``perf_counter``, and
:func:`stamping_mode` says which one a response would get.
"""

from __future__ import annotations

import functools
import math
import platform
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any, Literal

import gevent
import gevent.socket
from gevent import Timeout
from geventhttpclient.response import HTTPConnectionClosed

from loadknee_locust.client.ghc_internals import RESPONSE_NAMES, missing, warn_missing
from loadknee_locust.client.reconnect import WRITE_TRACKING_MARK

SO_TIMESTAMPNS = 35  # == SCM_TIMESTAMPNS; not exported by Python's socket module
_OTHER_NUMBERS = ("alpha", "mips", "parisc", "sparc")  # architectures where it is not 35
_TIMESPEC = struct.Struct("@ll")  # struct timespec of the _OLD option: two native longs
_ANC_SPACE = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0
BLOCK_SIZE = 64 * 1024  # one read takes everything queued (many streams' chunks are ~200 B)

KERNEL_STAMPS = sys.platform == "linux" and not platform.machine().lower().startswith(
    _OTHER_NUMBERS
)

#: how a response's lines were stamped: ``kernel`` (receive stamps), ``readline`` (when the read
#: returned: TLS, no stamps on this system), ``with_headers`` (the whole body came with the
#: headers, inside geventhttpclient's header read: stamped when read, nothing to choose)
StampingMode = Literal["kernel", "readline", "with_headers"]
LineFeed = Callable[[bytes, float], None]


_PROBE_TRIES = 20  # Linux switches stamping on a moment after the first socket asks: retry


@functools.cache
def kernel_stamps_work() -> bool:
    """Once per process: does a loopback TCP read come back with a receive stamp? (A sandboxed
    kernel may accept the option and never deliver the stamp.) The first segments after the
    option is first set can come unstamped, so it tries up to 20 times, 5 ms apart."""
    if not _ANC_SPACE:
        return False
    try:
        with (
            socket.create_server(("127.0.0.1", 0)) as server,
            socket.create_connection(server.getsockname()[:2], timeout=2.0) as client,
        ):
            client.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            peer, _addr = server.accept()
            with peer:
                for _ in range(_PROBE_TRIES):
                    peer.sendall(b"x")
                    _data, ancillary, _flags, _from = client.recvmsg(1, _ANC_SPACE)
                    if any(
                        lvl == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS
                        for lvl, kind, _ in ancillary
                    ):
                        return True
                    time.sleep(0.005)
    except OSError:
        return False
    return False


def _stampable(sock: Any) -> bool:
    """A plain gevent TCP socket on a system that delivers receive stamps (TLS sockets are a
    subclass: excluded)."""
    kind = type(sock)
    if getattr(kind, WRITE_TRACKING_MARK, False):  # the resend's write-tracking subclass
        kind = kind.__bases__[0]
    return KERNEL_STAMPS and kind is gevent.socket.socket and kernel_stamps_work()


def stamping_mode(resp: Any) -> StampingMode:
    """``kernel`` when this response's socket can give receive stamps, else ``readline`` (also
    when the response lacks an internal of :data:`ghc_internals.RESPONSE_NAMES`)."""
    absent = missing(resp, RESPONSE_NAMES)
    if absent:  # a geventhttpclient that renamed them: the portable path, said once
        warn_missing(type(resp).__name__, tuple(absent), "stream lines are stamped when read")
        return "readline"
    return "kernel" if _stampable(resp._sock) else "readline"


def enable_stamps(sock: Any) -> bool:
    """Turn on receive stamps for ``sock`` (a no-op where they do not apply); True if on.

    Bytes queued before this call carry no stamp, so do it when the socket connects
    (:func:`stamp_new_sockets`); :func:`read_stream` does it again, idempotently, for sockets
    that came from elsewhere."""
    if not _stampable(sock):
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False  # a kernel without the option
    return True


def stamp_new_sockets(pool: Any) -> None:
    """Make a geventhttpclient ``ConnectionPool`` enable stamps on each socket as it connects.

    Wraps the pool's ``after_connect`` hook (meant for setting socket options), per instance,
    once."""
    if getattr(pool, "_loadknee_stamps", False) or not hasattr(pool, "after_connect"):
        return
    inner = pool.after_connect

    def after_connect(sock: Any) -> None:
        inner(sock)
        enable_stamps(sock)

    pool.after_connect = after_connect
    pool._loadknee_stamps = True


def read_stream(
    resp: Any, feed: LineFeed, is_done: Callable[[], bool], timeout: float
) -> tuple[float | None, StampingMode]:
    """Feed every line of ``resp`` (geventhttpclient's response: Locust's ``resp.stream``) to
    ``feed(line, stamp)``; return the stamp of the line after which ``is_done()`` first held
    (the ``[DONE]`` event; None when it never did) and how lines were stamped (``kernel`` only
    when at least one read of this body carried a receive stamp).

    Lines after that one are not parsed, but the body is still read to its end so the
    connection goes back to the pool clean. A body that ends early returns normally (the parser
    sees no ``[DONE]``); a connection closed mid-body raises ``HTTPConnectionClosed``, silence
    for ``timeout`` seconds raises ``TimeoutError`` — the caller turns both into a row.
    """
    if getattr(resp, "message_complete", False):  # the whole body came with the headers
        return _read_lines(resp, feed, is_done, timeout), "with_headers"
    if stamping_mode(resp) == "kernel" and enable_stamps(resp._sock):
        done_at, stamped = _read_kernel_stamped(resp, feed, is_done, timeout)
        return done_at, "kernel" if stamped else "readline"
    return _read_lines(resp, feed, is_done, timeout), "readline"


def _read_lines(
    resp: Any, feed: LineFeed, is_done: Callable[[], bool], timeout: float
) -> float | None:
    """The portable path: geventhttpclient's ``readline``, stamped after each read returns;
    the socket's own timeout (per wait) is the read timeout."""
    sock = getattr(resp, "_sock", None)
    if sock is not None and hasattr(sock, "settimeout"):
        sock.settimeout(timeout)
    readline = resp.readline
    clock = time.perf_counter
    while line := readline(b"\n"):
        t = clock()
        feed(line, t)
        if is_done():
            while readline(b"\n"):  # to the end, so the socket is reusable
                pass
            return t
    return None


def _feed_complete_lines(
    buf: bytearray, feed: LineFeed, is_done: Callable[[], bool], t: float
) -> bool:
    """Feed the complete lines at the front of ``buf`` (removing them); True once done."""
    end = buf.rfind(b"\n")
    if end < 0:
        return False
    block = bytes(buf[:end])
    del buf[: end + 1]
    for line in block.split(b"\n"):
        feed(line, t)
        if is_done():
            return True
    return False


def _kernel_age(ancillary: list[tuple[int, int, bytes]], wall_now: float) -> float | None:
    """Seconds since the newest bytes of this read arrived (None when the kernel gave no stamp)."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            age = wall_now - (sec + nsec * 1e-9)
            return age if age > 0.0 else 0.0
    return None


def _read_kernel_stamped(
    resp: Any, feed: LineFeed, is_done: Callable[[], bool], timeout: float
) -> tuple[float | None, bool]:
    """The read loop; (stamp of [DONE] or None, whether any read carried a kernel stamp)."""
    sock = resp._sock
    buf: bytearray = resp._body_buffer
    clock, wall = time.perf_counter, time.time
    done_at: float | None = None
    stamped = False
    t = clock()  # lines that came in with the headers: stamped now, as readline would
    if _feed_complete_lines(buf, feed, is_done, t):
        done_at = t
    empty_at = -math.inf  # when a read last found the socket empty: nothing readable before it
    hub = gevent.get_hub()
    readable = hub.loop.io(sock.fileno(), 1)
    deadline = Timeout.start_new(timeout)
    last_data = clock()
    must_wait = False  # the headers' read may have left more queued: try a read first
    try:
        while True:
            try:
                if must_wait:
                    hub.wait(readable)
                data, ancillary, _flags, _addr = sock.recvmsg(BLOCK_SIZE, _ANC_SPACE)
            except Timeout as fired:
                if fired is not deadline:
                    raise
                idle = clock() - last_data
                if idle >= timeout:
                    raise TimeoutError(f"timed out (no data for {timeout:g} s)") from None
                deadline.close()
                deadline = Timeout.start_new(timeout - idle)  # data came since: re-arm lazily
                must_wait = False
                continue
            now, wall_now = clock(), wall()  # both before the parser spends any time
            last_data = now
            age = _kernel_age(ancillary, wall_now) if ancillary else None
            if age is None:
                t = now
            else:
                stamped = True
                t = max(now - age, empty_at)
            if len(data) < BLOCK_SIZE:
                must_wait, empty_at = True, now
            else:
                must_wait = False
            resp.feed(data)  # the HTTP parser: de-chunks into buf; on the last byte it releases
            if done_at is None and _feed_complete_lines(buf, feed, is_done, t):
                done_at = t
            if done_at is not None:
                del buf[:]  # after [DONE]: read on, parse nothing
            if resp.message_complete:  # an unterminated last line is dropped, as SSE says
                return done_at, stamped
            if not data:
                raise HTTPConnectionClosed("connection closed.")
    except BaseException:
        resp.release()
        raise
    finally:
        deadline.close()
        readable.close()
