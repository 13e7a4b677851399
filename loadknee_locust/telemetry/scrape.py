"""Fetch one Prometheus ``/metrics`` body over HTTP without blocking the gevent hub.

Why geventhttpclient: it ships with Locust, its sockets are gevent sockets whether or not the
interpreter is monkey-patched (so it is cooperative in tests too), and it keeps the connection
alive between scrapes. The whole fetch runs under one ``gevent.Timeout`` (connect + headers +
body), because the client's own timeouts apply to each socket operation, and a server that drips
its body slowly must not hold the sampler past its interval.

Credentials in the URL (``http://user:pass@host/metrics``) are sent as HTTP basic auth and never
appear in :attr:`Scraper.endpoint`, logs or errors.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
from typing import Literal
from urllib.parse import unquote, urlsplit

import gevent
from geventhttpclient import HTTPClient
from geventhttpclient.url import URL

from loadknee_core.promtext import redact_url

FailureKind = Literal["timeout", "connect_error", "http_error", "bad_response"]


class ScrapeError(Exception):
    """A failed scrape: a closed ``kind`` (one warning per kind) and a short one-line reason."""

    def __init__(self, kind: FailureKind, reason: str) -> None:
        super().__init__(reason)
        self.kind: FailureKind = kind
        self.reason = reason


class Scraper:
    """One scrape target; :meth:`fetch` returns the body text or raises :class:`ScrapeError`."""

    def __init__(self, url: str, *, timeout_s: float) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {redact_url(url)!r}")
        self.endpoint = redact_url(url)
        self.timeout_s = timeout_s
        self._url = URL(self.endpoint)
        self._headers = {"Accept": "text/plain", "Accept-Encoding": "identity"}
        if parts.username is not None:
            token = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            self._headers["Authorization"] = "Basic " + base64.b64encode(token.encode()).decode()
        self._client: HTTPClient | None = None

    def fetch(self) -> str:
        """GET the URL; the body as text. Raises :class:`ScrapeError`, never anything else."""
        try:
            with gevent.Timeout(self.timeout_s, _Deadline):
                if self._client is None:
                    self._client = HTTPClient.from_url(
                        self._url,
                        connection_timeout=self.timeout_s,
                        network_timeout=self.timeout_s,
                        headers=self._headers,
                    )
                response = self._client.get(self._url.request_uri)
                body = response.read()
                status = response.status_code
                encoding = response.get("content-encoding", "")
        except (_Deadline, TimeoutError) as exc:
            self.close()  # a half-read connection must not be reused
            raise ScrapeError("timeout", f"timed out after {self.timeout_s:g} s") from exc
        except ConnectionRefusedError as exc:
            self.close()
            raise ScrapeError("connect_error", "connection refused") from exc
        except Exception as exc:
            self.close()
            kind: FailureKind = "connect_error" if isinstance(exc, OSError) else "bad_response"
            raise ScrapeError(kind, _describe(exc)) from exc
        if status != 200:
            raise ScrapeError("http_error", f"HTTP {status}")
        try:
            if encoding == "gzip":
                body = gzip.decompress(body)
            return bytes(body).decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ScrapeError("bad_response", _describe(exc)) from exc

    def close(self) -> None:
        """Drop the kept-alive connection; safe to call twice."""
        client, self._client = self._client, None
        if client is not None:
            # closing a broken socket may fail; it is gone either way
            with contextlib.suppress(Exception):
                client.close()


class _Deadline(Exception):
    """Raised by the per-scrape gevent.Timeout (a private class, so no other timeout matches)."""


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:160]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
