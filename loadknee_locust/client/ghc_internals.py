"""The geventhttpclient internals the request path relies on, listed once, with the guard for them.

Why a list: the stream reader (``streamread``), the stale-socket resend (``reconnect``), the
no-reuse rule for servers that close after responses (``keepalive``) and the pool hooks in
``users`` reach into geventhttpclient's private names, which any release may rename.
``pyproject.toml`` pins geventhttpclient to :data:`TESTED_RANGE`;
``tests/loadknee_locust/client/test_ghc_internals.py``
checks every entry here against the installed library (and that those modules use no private
name missing from this list), so an upgrade fails one test that names the attribute and the
version instead of failing every request. At run time a missing internal is not fatal: each user
of the list falls back to its plain path (no resend hook, ``readline`` stamps) and says so once
in the log, through :func:`warn_missing`.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, Literal

log = logging.getLogger(__name__)

#: the geventhttpclient releases these internals were checked against (pyproject pins the same)
TESTED_RANGE = ">=2.6,<2.7"

#: ``method``: a callable on the class; ``attribute``: a value each instance holds
InternalKind = Literal["method", "attribute"]


@dataclass(frozen=True)
class Internal:
    """One name of geventhttpclient's that loadknee reads or replaces."""

    owner: str  # the class, as ``module.Class`` under ``geventhttpclient``
    name: str
    kind: InternalKind
    used_by: str  # the loadknee module that relies on it


_RESPONSE = "response.HTTPSocketResponse"
_POOL = "connectionpool.ConnectionPool"

#: every private (or easily renamed) geventhttpclient name the request path uses
GEVENTHTTPCLIENT_INTERNALS: tuple[Internal, ...] = (
    Internal("useragent.UserAgent", "_urlopen", "method", "reconnect"),
    Internal("useragent.UserAgent", "clientpool", "attribute", "reconnect"),
    Internal("useragent.CompatRequest", "url_split", "attribute", "reconnect"),
    Internal("client.HTTPClient", "_connection_pool", "attribute", "users"),
    Internal(_POOL, "_create_socket", "method", "reconnect"),
    Internal(_POOL, "_socket_queue", "attribute", "reconnect"),
    Internal(_POOL, "_is_socket_alive", "method", "reconnect"),
    Internal(_POOL, "after_connect", "method", "streamread"),
    Internal(_POOL, "return_socket", "method", "keepalive"),
    Internal(_POOL, "release_socket", "method", "keepalive"),
    Internal(_POOL, "_connection_host", "attribute", "keepalive"),
    Internal(_POOL, "_connection_port", "attribute", "keepalive"),
    Internal(_RESPONSE, "_sock", "attribute", "streamread"),
    Internal(_RESPONSE, "_body_buffer", "attribute", "streamread"),
    Internal(_RESPONSE, "feed", "method", "streamread"),
    Internal(_RESPONSE, "message_complete", "attribute", "streamread"),
    Internal(_RESPONSE, "release", "method", "streamread"),
)


def names(owner: str) -> tuple[str, ...]:
    """The listed names of one class (``owner`` as in :class:`Internal`)."""
    return tuple(i.name for i in GEVENTHTTPCLIENT_INTERNALS if i.owner == owner)


RESPONSE_NAMES = names(_RESPONSE)


def installed_version() -> str:
    """geventhttpclient's installed version ("unknown" when its metadata cannot be read)."""
    try:
        from importlib.metadata import version

        return version("geventhttpclient")
    except Exception:  # an unusual install: the version is only for messages
        return "unknown"


def missing(obj: Any, wanted: tuple[str, ...]) -> list[str]:
    """The names in ``wanted`` that ``obj`` lacks."""
    return [name for name in wanted if not hasattr(obj, name)]


@functools.cache
def warn_missing(what: str, absent: tuple[str, ...], fallback: str) -> None:
    """Log once per process that ``what`` lacks ``absent`` and ``fallback`` is used instead."""
    log.warning(
        "geventhttpclient %s has no %s on %s (loadknee is tested with %s): %s",
        installed_version(),
        ", ".join(absent),
        what,
        TESTED_RANGE,
        fallback,
    )
