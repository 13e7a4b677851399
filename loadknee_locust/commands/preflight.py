"""Pre-flight for ``loadknee run``: check the target, the prompt log and the output folder first.

Why: a wrong target used to cost a whole sweep and leave an empty run directory behind (a dead
host exited 0 after 117 refused requests; a missing ``--prompt-log`` was found only after Locust
had started). Each check here takes a second or less and, on failure, returns one message that
names the flag to fix; nothing is written. The checks, in order:

1. the output folder (``--out``) is writable (a probe file is created and removed);
2. the prompt log (``--prompt-log``) opens and holds at least one valid record;
3. the endpoint answers ``GET /v1/models``;
4. the model (``--model``) is among the served ids, or one is discovered there;
5. one short request to the chosen endpoint completes: streamed, it must carry at least one
   content chunk and end with ``[DONE]``; not streamed, it must parse;
6. the engine, once (:mod:`.engine_probe`): from the ``/v1/models`` answer already read (its
   ``owned_by``, its ``Server`` header) and, where that says llama.cpp or nothing, one
   ``GET /props``; recorded in ``run.json``'s ``server`` object so the advice spells the
   engine's flags even when the server exports no ``/metrics``.

After the checks, :func:`probe_limits` sends the concurrency probe's two bursts
(:mod:`loadknee_locust.client.concurrency_probe`, for ``loadknee predict``: a slot limit or a KV
budget), here rather than in the users so that no stage's clock runs while they go out.

Stdlib only (urllib): it runs in the wrapper process, before Locust and gevent exist.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from loadknee_core.redaction import strip_credentials
from loadknee_locust.client.concurrency_probe import PROBE_TOKENS, Streamed, probe_concurrency
from loadknee_locust.client.sse import StreamParser, classify
from loadknee_locust.commands import engine_probe

#: seconds allowed for each pre-flight request (a cold server may need a while for the first)
TIMEOUT_S = 60.0
#: the most of a ``/props`` answer read (llama-server's is ~2-10 kB with its chat template)
PROPS_BYTES = 1 << 20
#: the most of a ``/v1/models`` answer read (a gateway listing thousands of models stays under it)
MODELS_BYTES = 8 << 20
#: seconds allowed for ``/props`` (the server already answered; a gateway may hold unknown paths)
PROPS_TIMEOUT_S = 5.0


#: what a passed pre-flight sent to the server (one ``GET /v1/models``, one short request); the
#: wrapper adds it to ``run.json``'s ``setup_requests`` so the server's count still reconciles
SETUP_REQUESTS: dict[str, int] = {"preflight_model_discovery": 1, "preflight_requests": 1}


class PreflightError(Exception):
    """One clear message: what failed, and the flag to change."""


@dataclass(frozen=True)
class Target:
    """What the pre-flight needs to know about the run (the flags as the user typed them)."""

    host: str
    model: str  # "" = discover
    endpoint: str  # "chat" | "completions"
    stream: bool
    api_key_env: str
    prompt_log: str  # "" = fixed lengths
    out: str


def _host(target: Target) -> str:
    """The host without ``user:password@``: what is dialled and what a message may print."""
    return strip_credentials(target.host)


def _headers(target: Target) -> dict[str, str]:
    """The load's rule (client/credentials.py): Bearer with the API key when there is one, else
    Basic from the URL's ``user:password@``; urllib itself would read those as part of the host."""
    key = os.environ.get(target.api_key_env) if target.api_key_env else None
    headers = {"Content-Type": "application/json"}
    parts = urlsplit(target.host)
    if key:
        headers["Authorization"] = f"Bearer {key}"  # read at use, never stored or printed
    elif parts.username is not None or parts.password is not None:
        user, password = unquote(parts.username or ""), unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        headers["Authorization"] = f"Basic {token}"
    return headers


def _open(
    target: Target, path: str, body: dict[str, Any] | None = None, timeout_s: float = TIMEOUT_S
) -> Any:
    url = _host(target).rstrip("/") + path
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=_headers(target))
    try:
        return urllib.request.urlopen(request, timeout=timeout_s)
    except urllib.error.HTTPError as exc:
        detail = " ".join(exc.read(300).decode("utf-8", "replace").split())
        said = f"{'POST' if body else 'GET'} {url} answered HTTP {exc.code}"
        if _is_page(exc.headers, detail):
            raise PreflightError(f"{said} with a web page, {not_llm(target)}") from None
        raise PreflightError(
            said
            + (f": {detail}" if detail else "")
            + (
                " (is the API key set? --llm-api-key-env names its variable)"
                if exc.code in (401, 403)
                else ""
            )
            + (f"; {_fix_host(target)}" if exc.code == 404 else "")
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PreflightError(
            f"cannot reach {_host(target)} ({reason}): is the server running, and is --host right?"
        ) from None


def _is_page(headers: Any, text: str) -> bool:
    """Whether an answer is an HTML page (a web server, a login portal), not an API's JSON."""
    kind = str((headers or {}).get("Content-Type", "")) if headers is not None else ""
    return "html" in kind.lower() or text.lstrip().lower().startswith(("<!doctype", "<html"))


def _fix_host(target: Target) -> str:
    """What to change in ``--host`` when the server's answer is not an LLM API's."""
    host = _host(target).rstrip("/")
    if urlsplit(host).path.endswith("/v1"):
        return f"drop the /v1 from --host, loadknee adds it: --host {host[:-3]}"
    return "is --host the server's base URL (http://HOST:PORT, without a path)?"


def not_llm(target: Target) -> str:
    """The end of the message for a server whose answer is not an OpenAI-compatible API's."""
    return f"not an OpenAI-compatible LLM API: {_fix_host(target)}"


def check_out(out: str) -> None:
    """The output folder, or its nearest existing parent, accepts a file."""
    folder = Path(out)
    probe_in = folder
    while not probe_in.exists() and probe_in != probe_in.parent:
        probe_in = probe_in.parent
    try:
        with tempfile.TemporaryFile(dir=probe_in):
            pass
    except OSError as exc:
        raise PreflightError(f"--out {out}: cannot write there ({exc.strerror})") from None


def check_prompt_log(path: str) -> None:
    """The log opens and has at least one valid record (the count is not printed: no text)."""
    from loadknee_core.logindex import index_log

    if not os.path.isfile(path):
        raise PreflightError(f"--prompt-log {path}: no such file")
    try:
        index_log(path)
    except (OSError, ValueError) as exc:
        raise PreflightError(f"--prompt-log {path}: {exc}") from None


def check_model(target: Target, seen: dict[str, Any] | None = None) -> str:
    """The model to use: the one asked for, if served; else the first served id. ``seen``
    (when given) receives the answer's parsed body and headers, for :func:`detect_server`."""
    with _open(target, "/v1/models") as resp:
        headers = dict(resp.headers.items())
        text = resp.read(MODELS_BYTES).decode("utf-8", "replace")
    if _is_page(resp.headers, text):
        url = f"{_host(target).rstrip('/')}/v1/models"
        raise PreflightError(f"GET {url} answered with a web page, {not_llm(target)}")
    try:
        payload = json.loads(text)
        ids = [str(m.get("id")) for m in payload.get("data", [])]
    except (ValueError, AttributeError):
        payload, ids = None, []
    if seen is not None:
        seen.update(models=payload, headers=headers)
    if target.model:
        if ids and target.model not in ids:
            raise PreflightError(
                f"--model {target.model} is not served by {_host(target)}; it serves: "
                + ", ".join(ids[:10])
            )
        return target.model
    if not ids:
        raise PreflightError(f"{_host(target)}/v1/models lists no model: name one with --model")
    return ids[0]


def check_request(target: Target, model: str) -> None:
    """One short request completes; a stream carries content and ends with [DONE]."""
    body: dict[str, Any] = {"model": model, "max_tokens": 2, "stream": target.stream}
    if target.endpoint == "chat":
        path, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": "Hi"}]
    else:
        path, body["prompt"] = "/v1/completions", "Hi"
    where = f"POST {_host(target).rstrip('/')}{path} (--endpoint {target.endpoint})"
    with _open(target, path, body) as resp:
        if not target.stream:
            try:
                json.load(resp)
            except ValueError:
                raise PreflightError(f"{where}: the answer is not JSON") from None
            return
        content, done = 0, False
        for raw in resp:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            try:
                kind, _ = classify(json.loads(data))
            except ValueError:
                kind = "malformed"
            if kind in ("error", "malformed"):
                raise PreflightError(f"{where}: the stream sent an {kind} event: {data[:200]!r}")
            content += kind == "content"
    if not content or not done:
        missing = "no content chunk" if not content else "no closing [DONE]"
        raise PreflightError(
            f"{where}: the stream ended with {missing}; if it cannot stream, use --no-stream"
        )


def detect_server(target: Target, seen: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """``run.json``'s ``server`` object (:mod:`.engine_probe`) from the ``/v1/models`` answer,
    with one ``GET /props`` where it may be llama-server (a refusal or an error there is
    ignored: the probe never stops a run); returns it and the requests it sent (0 or 1)."""
    models, headers = seen.get("models"), seen.get("headers")
    engine = engine_probe.from_models(models) or engine_probe.from_headers(headers)
    props, sent = None, 0
    if engine_probe.wants_props(engine):
        sent = 1
        try:
            with _open(target, "/props", timeout_s=PROPS_TIMEOUT_S) as resp:
                props = json.loads(resp.read(PROPS_BYTES))
        except (PreflightError, ValueError, OSError):  # TimeoutError is an OSError
            props = None
    return engine_probe.server_info(models, headers, props), sent


def preflight_server(target: Target) -> tuple[str, dict[str, Any], int]:
    """Every check, in the module docstring's order, and the engine detection
    (:func:`detect_server`): the model to use, ``run.json``'s ``server`` object, and the probe
    requests sent beyond :data:`SETUP_REQUESTS`; raises :class:`PreflightError` on the first
    check that fails."""
    check_out(target.out)
    if target.prompt_log:
        check_prompt_log(target.prompt_log)
    seen: dict[str, Any] = {}
    model = check_model(target, seen)
    check_request(target, model)
    server, sent = detect_server(target, seen)
    return model, server, sent


def _streamed(target: Target, model: str, words: int, pin: bool) -> Streamed:
    """One probe request of ``words`` filler words (after a unique tag: no prefix-cache hit
    between them), streamed: the server's prompt tokens, its first content chunk's and its
    end's ``perf_counter``; ``pin``: ``ignore_eos`` and ``min_tokens`` (off where the run's
    ``--no-ignore-eos`` says the server refuses them). Raises on an error, an empty or a cut
    stream."""
    prompt = f"{uuid.uuid4().hex} " + "the " * max(words - 1, 0)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": PROBE_TOKENS,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if pin:
        body.update(min_tokens=PROBE_TOKENS, ignore_eos=True)
    if target.endpoint == "chat":
        path, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": prompt}]
    else:
        path, body["prompt"] = "/v1/completions", prompt
    parser = StreamParser()
    with _open(target, path, body) as resp:
        for raw in resp:
            parser.feed_line(raw, time.perf_counter())
            if parser.is_done():
                break
    end = time.perf_counter()
    if parser.error or not parser.content_times or not parser.is_done():
        raise ValueError(parser.error or "the probe's stream carried no content or was cut")
    usage = parser.usage
    return usage.prompt_tokens if usage else None, parser.content_times[0], end


def probe_limits(
    target: Target, model: str, prompt_tokens: int, pin: bool = True
) -> list[dict[str, Any]]:
    """The concurrency probe's two bursts at about ``prompt_tokens`` and twice it (one filler
    word is about one token; the server's own count is what is kept), as run.json's
    ``prompt_source.concurrency_probes``; never raises: a failed request is counted as such."""
    return probe_concurrency(
        lambda words: _streamed(target, model, words, pin), lambda tokens: tokens, prompt_tokens
    )
