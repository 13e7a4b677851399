"""Test locustfile: the rows locustfile's users, with the close-after-check race made certain.

A pooled socket is checked just before reuse (reconnect.py); a server's close that lands after
that check and before the write is the one case the resend exists for. On loopback the close
always wins that race, so here the check answers "alive" and the user waits 0.2 s between
requests: the server's reset has surely arrived, and the write on the reused socket fails. The
keep-alive learning (keepalive.py) is switched off for the same reason: it would stop the reuse.
"""

from __future__ import annotations

from typing import Any

from llm_rows_locustfile import Chat as _RowsChat


class Chat(_RowsChat):
    def on_start(self) -> None:
        super().on_start()
        if self._pool is not None:
            self._pool._is_socket_alive = _always_alive
        self.llm.closing_servers.expect_stream = _no_watch  # type: ignore[method-assign]

    def wait_time(self) -> float:
        return 0.2


def _always_alive(sock: Any) -> bool:
    return True


def _no_watch(pool: Any) -> None:
    return None
