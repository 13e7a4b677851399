"""A throwaway HTTP server on 127.0.0.1:0 for the tests that need a server to answer one way.

The tests write only what their server says (``do_GET``/``do_POST`` on a :class:`QuietHandler`);
sending a whole body, keeping the request log quiet, and serving in a daemon thread until the
block ends live here once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and answers with :meth:`send_body`."""

    def send_body(self, code: int, body: bytes, kind: str | None = None) -> None:
        """Answer ``code`` with ``body`` (``Content-Type: kind`` when given)."""
        self.send_response(code)
        if kind is not None:
            self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, code: int, obj: object) -> None:
        self.send_body(code, json.dumps(obj).encode(), "application/json")

    def stream_deltas(self, *deltas: dict[str, str]) -> None:
        """Read the request's body; answer with one chat-completion chunk per ``delta``, then
        ``[DONE]`` (an SSE stream, sent whole)."""
        self.rfile.read(int(self.headers["Content-Length"]))
        chunks = [{"choices": [{"delta": delta}]} for delta in deltas]
        events = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
        self.send_body(200, events + b"data: [DONE]\n\n", "text/event-stream")

    def log_message(self, *_args: object) -> None:
        pass


@contextmanager
def loopback_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on 127.0.0.1 (a free port) until the block ends; yields the base URL
    (``http://127.0.0.1:PORT``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
