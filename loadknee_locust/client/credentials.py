"""Take ``user:password@`` out of the host URL before Locust (or anything) stores it, and apply the
one rule for which credentials are sent.

Why: Locust writes the host into its ``--html`` report and shows it in the web UI, so URL
credentials ended up in files; and geventhttpclient turned them into a Basic ``Authorization``
header that silently replaced the Bearer API key on every request.

The rule: the API key (``--llm-api-key-env``), when set, is sent as ``Authorization: Bearer``
and the URL's credentials are not sent at all (a warning says so); without an API key, the URL's
credentials are sent as ``Authorization: Basic``. Either way the host Locust and loadknee keep
(``environment.host``, ``parsed_options.host``, every file) has no credentials. The credentials
live only in memory on this Environment, never in a file or a log line.
"""

from __future__ import annotations

import base64
import logging
from typing import Any
from urllib.parse import unquote, urlsplit

from loadknee_core.redaction import strip_credentials

log = logging.getLogger("loadknee")

_ATTR = "_loadknee_url_credentials"


def take_url_credentials(environment: Any) -> None:
    """Strip credentials from the host everywhere Locust keeps it; remember them in memory."""
    parsed = getattr(environment, "parsed_options", None)
    for host in (getattr(environment, "host", None), getattr(parsed, "host", None)):
        if not host:
            continue
        parts = urlsplit(str(host))
        if parts.username is not None or parts.password is not None:
            user, password = unquote(parts.username or ""), unquote(parts.password or "")
            setattr(environment, _ATTR, (user, password))
    if getattr(environment, _ATTR, None) is None:
        return
    if getattr(environment, "host", None):
        environment.host = strip_credentials(str(environment.host))
    if parsed is not None and getattr(parsed, "host", None):
        parsed.host = strip_credentials(str(parsed.host))


def basic_auth_header(environment: Any) -> dict[str, str]:
    """``Authorization: Basic`` from the URL's credentials, or {} when there were none."""
    creds = getattr(environment, _ATTR, None)
    if creds is None:
        return {}
    token = base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode("ascii")
    return {"Authorization": f"Basic {token}"}


def authorization(api_key: str | None, environment: Any) -> dict[str, str]:
    """The one rule: Bearer with the API key when there is one, else Basic from the URL."""
    if api_key:
        return {"Authorization": f"Bearer {api_key}"}
    return basic_auth_header(environment)


def has_url_credentials(environment: Any) -> bool:
    return getattr(environment, _ATTR, None) is not None
