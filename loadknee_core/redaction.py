"""Which names are secrets and how URLs lose their credentials: one rule for every output.

Shared by run.json (``rundir``), the telemetry CSVs and logs (``telemetry``) and the HTML report
(``analysis.report.html_params``), so that a key withheld in one place is withheld in all. Pure
stdlib, so ``analysis`` can import it without locust or gevent.

A name is secret when one of its words (split at ``_``, ``-``, ``.`` and camelCase) is a secret
word: ``api_key``, ``OPENAI_API_KEY``, ``hfToken``, ``web_auth`` are; ``max_tokens``,
``llm_input_tokens`` and ``keyboard`` are not (a plain substring test dropped the token counts
from run.json).
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit, urlunsplit

SECRET_PARTS: Final = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "auth",
        "authorization",
        "credential",
        "credentials",
        "bearer",
        "cookie",
    }
)


def name_parts(name: str) -> set[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return {part.lower() for part in re.split(r"[^A-Za-z0-9]+", spaced) if part}


def is_secret_name(name: str) -> bool:
    """True for ``api_key``, ``OPENAI_API_KEY``, ``hfToken``; not for ``max_tokens``."""
    return bool(name_parts(str(name)) & SECRET_PARTS)


def strip_credentials(url: str) -> str:
    """``http://user:pw@host:8000/v1`` → ``http://host:8000/v1``; other strings unchanged."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.scheme or "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
