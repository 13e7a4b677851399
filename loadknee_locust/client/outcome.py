"""Decide one request's outcome and build its ``context["loadknee"]`` row (pure, no locust).

The user class fills an :class:`Observation` while the request runs (status, what the SSE
parser or the body parser saw, a transport failure if any) and calls :func:`request_row`, which
returns the row for the recorder (keys are a subset of ``contract.REQUEST_COLUMNS``) and the
failure message for Locust (None when the request counts as a success in Locust's stats).

Precedence when several things went wrong: a transport failure (HTTP status, connect, timeout,
connection cut, client exception) > an error object in the stream > a malformed chunk > a stream
without ``[DONE]`` > no content at all > lengths that miss their targets (``length_mismatch``,
a success for Locust: the request was served, the analysis leaves it out of the statistics).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadknee_core.contract import NOT_ERROR_OUTCOMES, Outcome
from loadknee_locust.client.sse import Usage, short_text
from loadknee_locust.client.timing import request_timing

#: geventhttpclient's connection failures (not OSError subclasses), matched by class name
_CONNECTION_ERRORS = frozenset({"HTTPParseError", "HTTPConnectionClosed", "ConnectionError"})


@dataclass(slots=True)
class Observation:
    """What one request produced; mutable because it is filled while the response arrives."""

    start: float  # perf_counter before the request was sent
    end: float = 0.0  # perf_counter after the last byte (or the failure)
    http_status: int | None = None
    content_times: list[float] = field(default_factory=list)
    chunks: int = 0
    usage: Usage | None = None
    complete: bool = False  # [DONE] seen, or the whole body parsed
    stream_error: str | None = None
    malformed: str | None = None
    failure: Outcome | None = None  # transport-level failure, decided by classify_exception
    failure_reason: str | None = None


def classify_exception(exc: BaseException, *, during_body: bool) -> tuple[Outcome, str]:
    """Map a transport exception to an outcome (by type name, to stay free of gevent imports).

    geventhttpclient wraps the real cause (``RetriesExceeded(original=timeout())``): unwrap it.
    """
    for _ in range(5):
        inner = getattr(exc, "original", None)
        if not isinstance(inner, BaseException):
            break
        exc = inner
    names = {cls.__name__ for cls in type(exc).__mro__}
    reason = short_text(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    if isinstance(exc, TimeoutError) or "Timeout" in names:
        return "timeout", reason
    if isinstance(exc, OSError) or names & _CONNECTION_ERRORS:
        return ("incomplete" if during_body else "connect_error"), reason
    return "client_error", reason


def _decide(obs: Observation, stream: bool) -> tuple[Outcome | None, str | None]:
    if obs.failure is not None:
        return obs.failure, obs.failure_reason
    if obs.stream_error is not None:
        return "stream_error", obs.stream_error
    if obs.malformed is not None:
        return "malformed", f"bad chunk: {obs.malformed}" if stream else "bad body"
    if not obs.complete:
        return "incomplete", "stream ended before [DONE]" if stream else "body not complete"
    if obs.chunks == 0:
        return "empty_response", "no choices / no content"
    return None, None


def request_row(
    obs: Observation,
    *,
    base: dict[str, Any],
    stream: bool,
    batch_size: int,
    target_input_tokens: int | None,
    target_output_tokens: int | None,
) -> tuple[dict[str, Any], str | None]:
    """The recorder's row and Locust's failure message (None = a Locust success)."""
    outcome, error = _decide(obs, stream)
    usage = obs.usage
    prompt_tokens = usage.prompt_tokens if usage else None
    completion_tokens = usage.completion_tokens if usage else None
    if completion_tokens is not None:
        usage_source = "server"
    elif obs.chunks and stream:  # one content chunk ≈ one token; a whole body has no such hint
        usage_source, completion_tokens = "estimate", obs.chunks
    else:
        usage_source = "none"
    length_ok: bool | None = None
    if outcome is None and usage_source == "server":
        checks = [
            (target, got)
            for target, got in (
                (target_input_tokens, prompt_tokens),
                (target_output_tokens, completion_tokens),
            )
            if target is not None
        ]
        if checks:
            length_ok = all(got == target for target, got in checks)
            if not length_ok:
                outcome = "length_mismatch"
                error = "tokens " + ", ".join(f"{got} != {target}" for target, got in checks)
    timing = request_timing(
        obs.start, obs.end, obs.content_times if stream else (), completion_tokens, batch_size
    )
    row = dict(base)
    row.update(
        e2e_ms=timing.e2e_ms,
        end_unix_s=base["start_unix_s"] + timing.e2e_ms / 1000.0,
        ttft_ms=timing.ttft_ms,
        tpot_ms=timing.tpot_ms,
        itl_mean_ms=timing.itl_mean_ms,
        itl_p50_ms=timing.itl_p50_ms,
        itl_p95_ms=timing.itl_p95_ms,
        itl_max_ms=timing.itl_max_ms,
        chunks=obs.chunks if stream else None,  # a whole body has no chunks
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cached_tokens=usage.cached_tokens if usage else None,
        usage_source=usage_source,
        target_input_tokens=target_input_tokens,
        target_output_tokens=target_output_tokens,
        length_ok=length_ok,
        outcome=outcome or "ok",
        http_status=obs.http_status,
        error=error,
    )
    wait_ms = base.get("send_wait_ms")
    if wait_ms is not None:  # open loop: timed from the planned send too (no coordinated omission)
        row["e2e_intended_ms"] = wait_ms + timing.e2e_ms
    final: Outcome = outcome or "ok"
    failure = None if final in NOT_ERROR_OUTCOMES else f"{final}: {error}" if error else final
    return row, failure
