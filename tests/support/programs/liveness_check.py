"""Ask a pool whether idle sockets are alive, before and after ``check_liveness_without_yielding``.

Run in a child process: it monkey-patches the interpreter with gevent, as Locust does. For an idle
live socket, one the server closed, and (where the descriptor limit allows) the live one again at
descriptor 1100, it records [alive, yielded to the hub]; prints ``{"before": ..., "after": ...}``.
"""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import select  # noqa: E402
import socket  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402
from geventhttpclient.connectionpool import ConnectionPool  # noqa: E402

from loadknee_locust.client.reconnect import check_liveness_without_yielding  # noqa: E402

listener = socket.create_server(("127.0.0.1", 0))
port = listener.getsockname()[1]
pool = ConnectionPool("127.0.0.1", port, "127.0.0.1", port, size=2)
idle = pool.get_socket()  # a fresh, connected, idle socket
peer_of_idle, _ = listener.accept()
closing = pool.get_socket()
peer, _ = listener.accept()
peer.close()  # the server closed this one: readable (EOF) while idle
readable, _, _ = select.select([closing], [], [], 10.0)  # wait for the close to arrive
assert readable, "the server's close did not reach the client within 10 s"


def check(sock: Any) -> tuple[bool, bool]:
    ran: list[int] = []
    gevent.spawn(ran.append, 1)  # runs only if the check yields to the hub
    alive = pool._is_socket_alive(sock)
    return alive, bool(ran)


class Descriptor:
    """The idle socket again, at a descriptor number select() refuses."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
high = None
if hard == resource.RLIM_INFINITY or hard > 1200:
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    high = Descriptor(os.dup2(idle.fileno(), 1100))

before = [check(idle), check(closing)] + ([check(high)] if high else [])
check_liveness_without_yielding(pool)
after = [check(idle), check(closing)] + ([check(high)] if high else [])
print(json.dumps({"before": before, "after": after}))
