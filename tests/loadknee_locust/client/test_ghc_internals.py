"""The geventhttpclient internals loadknee relies on exist in the installed release, and a missing
one makes the request path fall back instead of failing.

The existence check builds the real objects (a user agent, a client and its pool, a response
read from a loopback server) and looks up every entry of ``ghc_internals``; a second test reads
the modules that use internals and fails when one uses a private name the list lacks, so a new
private use cannot slip past the first.
"""

from __future__ import annotations

import ast
import importlib
import logging
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import geventhttpclient
import pytest
from geventhttpclient import HTTPClient
from geventhttpclient.useragent import CompatRequest, UserAgent

from loadknee_locust.client import ghc_internals, reconnect, streamread
from loadknee_locust.client.ghc_internals import GEVENTHTTPCLIENT_INTERNALS, TESTED_RANGE
from tests.support.loopback_http import QuietHandler, loopback_server

CLIENT_DIR = Path(ghc_internals.__file__).parent
USERS_OF_INTERNALS = ("streamread.py", "reconnect.py", "keepalive.py", "users.py")


class _Hello(QuietHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_body(200, b"ok")


@pytest.fixture
def hello_port() -> Iterator[int]:
    with loopback_server(_Hello) as url:
        yield int(url.rsplit(":", 1)[1])


def test_every_listed_geventhttpclient_internal_exists_with_its_kind(hello_port: int) -> None:
    client = HTTPClient("127.0.0.1", hello_port, connection_timeout=5, network_timeout=5)
    try:
        response = client.get("/")
        instances: dict[str, Any] = {
            "useragent.UserAgent": UserAgent(),
            "useragent.CompatRequest": CompatRequest(f"http://127.0.0.1:{hello_port}/"),
            "client.HTTPClient": client,
            "connectionpool.ConnectionPool": client._connection_pool,
            "response.HTTPSocketResponse": response,
        }
        assert response.read() == b"ok"  # the response really came over loopback
        version = geventhttpclient.__version__
        problems = []
        for internal in GEVENTHTTPCLIENT_INTERNALS:
            module, _, cls_name = internal.owner.rpartition(".")
            cls = getattr(importlib.import_module(f"geventhttpclient.{module}"), cls_name)
            obj = instances[internal.owner]
            assert isinstance(obj, cls), f"the test built no {internal.owner}"
            if internal.kind == "method":
                ok = callable(getattr(cls, internal.name, None))
            else:
                ok = hasattr(obj, internal.name) and not callable(getattr(cls, internal.name, None))
            if not ok:
                problems.append(
                    f"geventhttpclient {version} renamed or removed {internal.kind} "
                    f"{internal.owner}.{internal.name}; loadknee's {internal.used_by} relies on "
                    f"it: pin geventhttpclient{TESTED_RANGE} (or adapt ghc_internals.py)"
                )
        assert not problems, "\n".join(problems)
    finally:
        client.close()


def _private_names_used(source: str) -> set[str]:
    """Private names read off objects other than ``self`` (``x._y``, ``getattr(x, "_y")``),
    loadknee's own ``_loadknee_*`` marks excluded."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        name = None
        if isinstance(node, ast.Attribute) and not (
            isinstance(node.value, ast.Name) and node.value.id == "self"
        ):
            name = node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "hasattr", "setattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            name = node.args[1].value
        if name and name.startswith("_") and not name.startswith(("__", "_loadknee")):
            found.add(name)
    return found


def test_no_private_geventhttpclient_name_is_used_without_being_listed() -> None:
    listed = {i.name for i in GEVENTHTTPCLIENT_INTERNALS}
    for module in USERS_OF_INTERNALS:
        used = _private_names_used((CLIENT_DIR / module).read_text())
        assert used <= listed, (
            f"{module} uses private names not in ghc_internals.GEVENTHTTPCLIENT_INTERNALS: "
            f"{sorted(used - listed)} (list them, so the internals test checks them)"
        )


def test_private_name_scan_sees_attribute_and_getattr_uses() -> None:
    source = "a._b\ngetattr(a, '_c', None)\nself._d\npool._loadknee_x\na.__class__\n"
    assert _private_names_used(source) == {"_b", "_c"}


def test_an_agent_without_urlopen_keeps_its_plain_path_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A geventhttpclient that renamed ``_urlopen`` must not stop users from spawning."""
    ghc_internals.warn_missing.cache_clear()
    agents = [SimpleNamespace(clientpool=None), SimpleNamespace(clientpool=None)]
    with caplog.at_level(logging.WARNING, logger=ghc_internals.__name__):
        for agent in agents:
            reconnect.install_stale_retry(agent, on_retry=None)
    assert all(vars(agent) == {"clientpool": None} for agent in agents)  # nothing wrapped
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    # words are the product: the warning a user reads when a patched internal is missing
    assert len(warnings) == 1 and "_urlopen" in warnings[0] and "not resent" in warnings[0]


def test_an_agent_with_urlopen_gets_the_resend_hook() -> None:
    """The guard's other side: the real agent is still wrapped (the fallback is not taken)."""
    agent = UserAgent()
    plain = agent._urlopen
    reconnect.install_stale_retry(agent)
    assert agent._urlopen is not plain and getattr(agent, "_loadknee_stale_retry", False)


class _LinesOnly:
    """A response with the public ``readline`` and none of the internals."""

    def __init__(self, body: bytes) -> None:
        self._lines = body.splitlines(keepends=True)

    def readline(self, sep: bytes = b"\n") -> bytes:
        return self._lines.pop(0) if self._lines else b""


def test_a_response_without_internals_is_read_by_readline_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ghc_internals.warn_missing.cache_clear()
    fed: list[bytes] = []
    with caplog.at_level(logging.WARNING, logger=ghc_internals.__name__):
        for _ in range(2):
            fed.clear()
            resp = _LinesOnly(b"data: a\n\ndata: [DONE]\n\ndata: late\n\n")
            done, mode = streamread.read_stream(
                resp, lambda line, t: fed.append(line), lambda: b"[DONE]" in b"".join(fed), 5.0
            )
            assert mode == "readline" and done is not None
            assert fed == [b"data: a\n", b"\n", b"data: [DONE]\n"] and resp._lines == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "_sock" in warnings[0] and "_body_buffer" in warnings[0]
