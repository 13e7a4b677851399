"""A tiny /metrics server on 127.0.0.1:0 (stdlib, its own thread) with one path per behaviour."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer

from tests.support.loopback_http import QuietHandler
from tests.support.ports import free_port

GOOD = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="m"}} {n}
vllm:num_requests_waiting{{model_name="m"}} 0
vllm:kv_cache_usage_perc{{model_name="m"}} 0.25
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{{model_name="m"}} 0
DCGM_FI_DEV_FB_USED{{gpu="0",UUID="GPU-1"}} 40000
DCGM_FI_DEV_FB_FREE{{gpu="0",UUID="GPU-1"}} 41920
DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="GPU-1"}} 55
DCGM_FI_PROF_SM_ACTIVE{{gpu="0",UUID="GPU-1"}} 0.5
"""
NO_DCGM = 'vllm:num_requests_running{model_name="m"} 1\n'


class _Handler(QuietHandler):
    server: _Server

    def do_GET(self) -> None:
        self.server.requests.append((self.path, self.headers.get("Authorization")))
        path = self.path.split("?")[0]
        if path == "/slow":
            time.sleep(self.server.slow_s)
        if path in ("/metrics", "/slow"):
            self._send(200, GOOD.format(n=len(self.server.requests)))
        elif path == "/nodcgm":
            self._send(200, NO_DCGM)
        elif path == "/garbage":
            self._send(200, "<html><body>hello</body></html>")
        elif path == "/empty":
            self._send(200, "")
        else:
            self._send(500, "boom")

    def _send(self, status: int, text: str) -> None:
        self.send_body(status, text.encode(), "text/plain; version=0.0.4")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    requests: list[tuple[str, str | None]]
    slow_s: float

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that gave up on ``/slow`` (the timeout test) is expected: no traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


@contextmanager
def metrics_server(*, slow_s: float = 3.0) -> Iterator[_Server]:
    """Serve until the block ends; ``server.url(path)``-style: f"http://127.0.0.1:{port}{path}"."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.requests = []
    server.slow_s = slow_s
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def base_url(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def refused_url() -> str:
    """A loopback URL nobody listens on (bound, then closed)."""
    return f"http://127.0.0.1:{free_port()}/metrics"
