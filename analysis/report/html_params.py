"""The run's parameters as report.html shows them: no secret, no empty value, no local path.

Secrets never reach the page: :func:`redact` drops every run.json key whose name has a part
``key``/``token``/``secret``/``password``/``auth``/``credential`` (``api_key``, ``hf_token``,
``X-Auth``; not ``input_tokens``), any string value that looks like a bearer token, and the
user:password part of URLs. :func:`local_paths` leaves out empty values and shortens absolute
paths to file names: where a file lay on the machine that ran the sweep names its user's folders
and says nothing to a reader elsewhere.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import PureWindowsPath
from typing import Any

from analysis.report.html_kit import esc
from loadknee_core.redaction import is_secret_name

_SECRET_VALUE = re.compile(r"^(sk-|Bearer\s|hf_|ghp_|xox[bp]-)", re.IGNORECASE)
_URL_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/@\s]+@", re.IGNORECASE)
_ABSOLUTE_PATH = re.compile(r"^(/|[A-Za-z]:\\)[^\s]*$")
WITHHELD = "[withheld]"


def is_secret_key(key: str) -> bool:
    """True for ``api_key``, ``OPENAI_API_KEY``, ``hfToken``, not ``max_tokens``."""
    return is_secret_name(str(key))


def redact(value: Any) -> Any:
    """A copy of ``value`` without secret keys, token-looking strings or URL credentials."""
    if isinstance(value, Mapping):
        return {k: redact(v) for k, v in value.items() if not is_secret_key(str(k))}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str):
        if _SECRET_VALUE.match(value.strip()):
            return WITHHELD
        return _URL_USERINFO.sub(r"\g<scheme>", value)
    return value


def local_paths(value: Any) -> Any:
    """A copy of ``value`` without empty values (``None``, ``""``, ``{}``, ``[]``) and with each
    absolute path shortened to its file name."""
    if isinstance(value, Mapping):
        kept = {k: local_paths(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None and v not in ("", {}, [])}
    if isinstance(value, list | tuple):
        return [local_paths(v) for v in value]
    if isinstance(value, str) and _ABSOLUTE_PATH.match(value):
        return PureWindowsPath(value).name or value  # splits at / and at a backslash
    return value


def params_html(run_info: Mapping[str, Any]) -> str:
    """run.json folded, as :func:`redact` and :func:`local_paths` leave it."""
    params = json.dumps(local_paths(redact(dict(run_info))), indent=2, sort_keys=True, default=str)
    return (
        "<details><summary>run.json, secrets withheld, empty values left out, file names "
        f"for absolute paths</summary><pre>{esc(params)}</pre></details>"
    )
