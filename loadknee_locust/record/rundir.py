"""Create the run directory and write ``run.json``: every parameter, never a secret.

``runs/<run_id>/`` is the contract between the Locust side and ``analysis`` (see contract.py).
``run.json`` holds the parsed options minus anything secret (an option whose name contains
key/token/secret/password/auth/credential, or that Locust marks ``is_secret``), the target URL
with credentials stripped (also from every other URL-looking value), the model, the prompt source
(kind, target lengths, the log's sha256, never its text), versions, start time, worker count and
levels. It is rewritten atomically (temp file + rename) when something is learned later (prompt
calibration, end of run), so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadknee_core.contract import RUN_JSON
from loadknee_core.redaction import is_secret_name, strip_credentials
from loadknee_locust import __version__
from loadknee_locust.sweep.schedule import parse_levels

if TYPE_CHECKING:  # the options live with the Locust wiring, above this module
    from loadknee_locust.plugin.options import LlmOptions

_RUN_ID_OK = re.compile(r"^[A-Za-z0-9._-]+$")


def public_options(options: Any, secret_names: Iterable[str] = ()) -> dict[str, Any]:
    """The parsed options as JSON-able values, without secrets, URLs without credentials."""
    items = options.items() if isinstance(options, Mapping) else vars(options).items()
    secret = set(secret_names)
    out: dict[str, Any] = {}
    for name, value in sorted(items):
        if name.startswith("_") or name in secret or is_secret_name(name):
            continue
        out[name] = _jsonable(value)
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, str):
        return strip_credentials(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items() if not is_secret_name(str(k))}
    return str(value)


def file_sha256(path: str | os.PathLike[str]) -> str | None:
    """sha256 of a file's bytes (None when it cannot be read)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def prompt_info_from_options(options: LlmOptions) -> dict[str, Any]:
    """What the options say about the prompts (the user classes may add calibration later)."""
    log = options.prompt_log
    if log:
        return {
            "kind": "log",
            "log_file": os.path.basename(log),
            "log_sha256": file_sha256(log),
            "log_format": options.log_format,
            "output_scale": options.output_scale,
        }
    return {
        "kind": "fixed",
        "target_input_tokens": options.input_tokens,
        "target_output_tokens": options.output_tokens,
        "shared_prefix_tokens": options.shared_prefix_tokens,
    }


def default_run_id(now_unix_s: float) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now_unix_s))


def create_run_dir(out: str | os.PathLike[str], run_id: str, now_unix_s: float) -> Path:
    """Make ``out/run_id`` (a timestamp when empty); never reuse a directory that has files."""
    base = run_id or default_run_id(now_unix_s)
    if not _RUN_ID_OK.match(base):
        raise ValueError(f"--llm-run-id may hold letters, digits, '.', '_' and '-' only: {base!r}")
    parent = Path(out)
    parent.mkdir(parents=True, exist_ok=True)
    for n in range(1000):
        path = parent / (base if n == 0 else f"{base}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            if not any(path.iterdir()):
                return path
    raise FileExistsError(f"no free run directory name under {parent} for {base!r}")


def versions() -> dict[str, str]:
    """loadknee's, Python's and the installed locust's and geventhttpclient's versions (the
    stream reader relies on geventhttpclient internals: a run says which release read it)."""
    out = {"loadknee": __version__, "python": platform.python_version()}
    from importlib.metadata import PackageNotFoundError, version

    for package in ("locust", "geventhttpclient"):
        with contextlib.suppress(PackageNotFoundError):  # an odd install: the key is left out
            out[package] = version(package)
    return out


def write_run_json(run_dir: str | os.PathLike[str], info: Mapping[str, Any]) -> Path:
    """Write ``run.json`` atomically (a reader sees the old or the new file, never half)."""
    path = Path(run_dir) / RUN_JSON
    tmp = path.with_name(RUN_JSON + ".tmp")
    tmp.write_text(json.dumps(info, indent=2, sort_keys=True, default=str) + "\n", "utf-8")
    os.replace(tmp, path)
    return path


def build_run_info(
    *,
    run_id: str,
    start_unix_s: float,
    host: str,
    options: LlmOptions,
    parsed: Any = None,
    mode: str,
    worker_count: int,
    stop_timeout_s: float | None,
    secret_names: Iterable[str] = (),
) -> dict[str, Any]:
    """The content of ``run.json`` at the start of a run (end fields filled in later).

    Keys: run_id, start_unix_s, end_unix_s, stop_reason, requests_recorded (None until the end),
    target_url, model (None until known), endpoint, stream, levels, mode (local | master),
    worker_count (0 in one process), stop_timeout_s, prompt_source, versions, parameters.
    ``parameters`` are Locust's ``parsed`` options, its own included (without a parser: the
    ``--llm-*`` values of ``options``).
    """
    try:
        levels: list[int] | None = list(parse_levels(options.levels))
    except ValueError:
        levels = None
    return {
        "run_id": run_id,
        "start_unix_s": start_unix_s,
        "end_unix_s": None,
        "stop_reason": None,
        "requests_recorded": None,
        "target_url": strip_credentials(host or str(getattr(parsed, "host", "") or "")),
        "model": options.model or None,
        "endpoint": options.endpoint,
        "stream": options.stream,
        "levels": levels,
        "mode": mode,
        "worker_count": worker_count,
        "stop_timeout_s": stop_timeout_s,
        "prompt_source": prompt_info_from_options(options),
        "versions": versions(),
        "parameters": public_options(
            options.as_parameters() if parsed is None else parsed, secret_names
        ),
    }
