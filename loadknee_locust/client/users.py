"""Locust user classes that drive an OpenAI-compatible LLM server and time every stream exactly.

``LLMUser`` (abstract) sends one request per task iteration, closed loop (no wait), and fires
exactly ONE Locust ``request`` event per request: ``request_type="POST"``, ``name`` = ``chat`` /
``completions`` / ``completions-batch``, ``response_time`` = the real end-to-end time in ms (not
the time to headers), ``response_length`` = completion tokens, ``exception`` set on failure, and
``context["loadknee"]`` = the row for ``requests.csv`` (see ``outcome.request_row``).

Streams are read line by line straight off the socket (Locust's iter_content/iter_lines buffer
1 KB and blur TTFT), each line stamped with the kernel's receive time where the socket gives it
(:mod:`loadknee_locust.client.streamread`), and read to the end after ``[DONE]`` so the
connection goes back to the pool clean. Every exception is caught inside
the ``catch_response`` block, so a failure is a row, never a silent loss.

Per-process state (prompt source, calibration, discovered model) lives on the Environment
(:func:`~loadknee_locust.client.state.llm_state`), never in a module global.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import Any, ClassVar

from locust import FastHttpUser, task
from locust.exception import StopUser

from loadknee_core.contract import NOT_ERROR_OUTCOMES, Outcome
from loadknee_locust.client import payloads
from loadknee_locust.client.backoff import FailureBackoff
from loadknee_locust.client.classes import class_mix
from loadknee_locust.client.outcome import Observation, classify_exception, request_row
from loadknee_locust.client.reconnect import check_liveness_without_yielding, install_stale_retry
from loadknee_locust.client.sse import StreamParser, error_message, parse_body, short_text
from loadknee_locust.client.state import LLMState, build_body, llm_state, prompt_source_info
from loadknee_locust.client.streamread import read_stream, stamp_new_sockets
from loadknee_locust.plugin.options import llm_options
from loadknee_locust.prompts import Prompt
from loadknee_locust.prompts.model import Endpoint

__all__ = [
    "BatchCompletionsUser",
    "ChatUser",
    "CompletionsUser",
    "LLMState",
    "LLMUser",
    "llm_state",
    "prompt_source_info",
]

_CONNECT_ERROR_BACKOFF_S = 0.1  # a refused connection fails in µs: do not spin on a dead server


def _sum_or_none(values: list[int | None]) -> int | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


class LLMUser(FastHttpUser):
    """Abstract base: one LLM request per iteration; subclasses choose the endpoint."""

    abstract = True
    endpoint: ClassVar[Endpoint] = "chat"
    request_name: ClassVar[str] = "chat"
    #: prompts per request; None = ``--llm-batch-size`` (completions only)
    batch_size: ClassVar[int | None] = 1

    def __init__(self, environment: Any) -> None:
        timeout = llm_options(environment).request_timeout
        self.network_timeout = timeout  # per socket read: the longest prefill or token gap
        self.connection_timeout = timeout
        super().__init__(environment)
        self.llm = llm_state(environment)
        self.user_id = self.llm.next_user_id()
        # a POST on a keep-alive socket the server already closed is resent once (reconnect.py)
        install_stale_retry(self.client.client, self._note_resend)
        self._resends = 0  # of the request in flight: its row's ``resent``
        pool = None
        try:
            if self.host:
                pool = self.client.client.clientpool.get_client(self.host)._connection_pool
        except Exception:  # an odd host: its requests become rows that say what is wrong
            pool = None
        self._pool = pool
        if pool is not None:
            stamp_new_sockets(pool)  # receive stamps from each connection's first byte
            check_liveness_without_yielding(pool)  # no greenlet switch before the request goes
            self.llm.closing_servers.install(pool)  # a server that closes after responses
        self._backoff = 0.0
        self._failures = FailureBackoff()
        self._traffic_class = ""  # of the request being built (--llm-classes)

    def _note_resend(self) -> None:
        """The request in flight went out again on a fresh socket (reconnect.py's one resend)."""
        self._resends += 1
        self.llm.count_stale_retry()

    def wait_time(self) -> float:
        """Closed loop: 0 s between requests; a back-off after a refused connect, and one that
        grows over a streak of failures (backoff.py: no hot loop against a failing target)."""
        backoff, self._backoff = self._backoff, 0.0
        return backoff

    def on_start(self) -> None:
        self.llm.prepare(self.host or "", self.endpoint)

    @task
    def generate(self) -> None:
        if self.llm.source is None:
            self.llm.stop_test()
            raise StopUser()  # quietly: the reason was logged once
        self.send_request()

    def _prompts(self) -> list[Prompt]:
        mix = class_mix(self.llm)
        if mix is not None:  # --llm-classes: this request's class by the weighted cycle
            chosen, class_source = mix.next()
            self._traffic_class = chosen.name
            return [class_source.next_prompt(self.endpoint)]
        k = self.batch_size if self.batch_size is not None else self.llm.options.batch_size
        source = self.llm.source
        assert source is not None
        return [source.next_prompt(self.endpoint) for _ in range(max(1, k))]

    def row_context(self) -> dict[str, Any]:
        """Extra columns for this request's row: its traffic class (a conversation adds its id
        and turn); called after :meth:`_prompts` chose the prompts."""
        return {"traffic_class": self._traffic_class} if self._traffic_class else {}

    def send_request(self) -> dict[str, Any]:
        """Send one request, fire its one event, return its row."""
        llm = self.llm
        request_id = uuid.uuid4().hex[:16]
        stream = llm.options.stream
        base: dict[str, Any] = {
            "request_id": request_id,
            "user_id": self.user_id,
            "endpoint": self.endpoint,
            "stream": stream,
        }
        try:
            if llm.body_options is None or not llm.model:
                llm.prepare(self.host or "", self.endpoint)
            prompts = self._prompts()
            base.update(self.row_context())
            assert llm.body_options is not None
            data = payloads.encode(build_body(self.endpoint, llm.body_options, prompts))
        except Exception as exc:  # a bug or bad input here must still be a row
            return self._fire_client_error(base, exc)
        k = len(prompts)
        base["batch_size"] = k
        base["prompt_hash"] = prompts[0].prompt_hash if k == 1 else _joined_hash(prompts)
        targets_in = _sum_or_none([p.target_input_tokens for p in prompts])
        targets_out = _sum_or_none([p.target_output_tokens for p in prompts])
        headers = {
            "Content-Type": "application/json",
            "X-Request-Id": request_id,
            "Accept-Encoding": "identity",
            **llm.auth_headers(),
        }
        if stream:
            headers["Accept"] = "text/event-stream"
        path = payloads.CHAT_PATH if self.endpoint == "chat" else payloads.COMPLETIONS_PATH
        base["start_unix_s"] = time.time()
        self._resends = 0
        obs = Observation(start=time.perf_counter())
        try:
            answer = self.client.request(
                "POST",
                path,
                name=self.request_name,
                data=data,  # type: ignore[arg-type]  # bytes go out as-is
                headers=headers,
                stream=stream,
                catch_response=True,
            )
        except BaseException as exc:  # stopped (GreenletExit) before any response: still a row
            obs.end = time.perf_counter()
            obs.failure, obs.failure_reason = _stopped_or_classified(exc, "before the response")
            row = self._report(None, obs, base, stream, k, targets_in, targets_out)
            if not isinstance(exc, Exception):
                raise  # GreenletExit / KeyboardInterrupt: report, then let the stop proceed
            return row
        with answer as resp:
            try:
                self._read_response(resp, obs, stream)
            except BaseException as exc:  # GreenletExit too: the user was stopped mid-request
                obs.end = time.perf_counter()
                if obs.failure is None:
                    obs.failure, obs.failure_reason = _stopped_or_classified(
                        exc, "mid-request", during_body=obs.http_status is not None
                    )
                row = self._report(resp, obs, base, stream, k, targets_in, targets_out)
                if not isinstance(exc, Exception):
                    raise  # GreenletExit / KeyboardInterrupt: report, then let the stop proceed
                return row
            obs.end = obs.end or time.perf_counter()
            return self._report(resp, obs, base, stream, k, targets_in, targets_out)

    def _read_response(self, resp: Any, obs: Observation, stream: bool) -> None:
        status = resp.status_code or None
        obs.http_status = status
        if status is None:
            err = getattr(resp, "error", None) or ConnectionError("no response")
            obs.failure, obs.failure_reason = classify_exception(err, during_body=False)
            if obs.failure == "connect_error":
                self._backoff = max(_CONNECT_ERROR_BACKOFF_S, self._failures.after(True))
            return
        if not 200 <= status < 300:
            obs.failure, obs.failure_reason = "http_error", _http_reason(resp, status)
            return
        if stream:
            self._read_stream(resp, obs)
            return
        result = parse_body(resp.content or b"")
        obs.complete = True
        obs.chunks = result.chunks
        obs.usage = result.usage
        if result.kind == "error":
            obs.stream_error = result.error
        elif result.kind == "malformed":
            obs.malformed = result.error

    def _read_stream(self, resp: Any, obs: Observation) -> None:
        parser = StreamParser()
        if self._pool is not None:
            self.llm.closing_servers.expect_stream(self._pool)  # does it close after a stream?
        try:
            done_at, stamps = read_stream(
                resp.stream, parser.feed_line, parser.is_done, timeout=self.network_timeout
            )
            self.llm.count_stream_stamps(stamps)
            if done_at is not None:
                obs.end = done_at  # the response is complete at [DONE]; the rest is hygiene
            parser.finish()
        finally:
            obs.content_times = parser.content_times
            obs.chunks = parser.chunks
            obs.usage = parser.usage
            obs.complete = parser.done
            obs.stream_error = parser.error
            obs.malformed = parser.malformed

    def _report(
        self,
        resp: Any | None,
        obs: Observation,
        base: dict[str, Any],
        stream: bool,
        k: int,
        targets_in: int | None,
        targets_out: int | None,
    ) -> dict[str, Any]:
        row, failure = request_row(
            obs,
            base={**base, "resent": self._resends},
            stream=stream,
            batch_size=k,
            target_input_tokens=targets_in,
            target_output_tokens=targets_out,
        )
        if resp is None:  # Locust's request() raised: no response object carries the event
            self._fire_unanswered(row)
        else:
            meta = resp.request_meta
            meta["response_time"] = row["e2e_ms"]
            meta["response_length"] = row["completion_tokens"] or 0
            meta["context"] = {**(meta.get("context") or {}), "loadknee": row}
            if failure is None:
                resp.success()
            else:
                resp.failure(failure)
        failed = row.get("outcome") not in NOT_ERROR_OUTCOMES
        self._backoff = max(self._backoff, self._failures.after(failed))
        return row

    def _fire_client_error(self, base: dict[str, Any], exc: Exception) -> dict[str, Any]:
        now = time.time()
        reason = short_text(f"{type(exc).__name__}: {exc}")
        row = {
            **base,
            "start_unix_s": now,
            "end_unix_s": now,
            "e2e_ms": 0.0,
            "outcome": "client_error",
            "error": reason,
            "usage_source": "none",
            "resent": 0,
        }
        self._fire_unanswered(row)
        self._backoff = _CONNECT_ERROR_BACKOFF_S
        return row

    def _fire_unanswered(self, row: dict[str, Any]) -> None:
        """Fire the one event of a request that has no response object to carry it (Locust's
        ``request()`` raised, or the request was never sent): the row still reaches the files."""
        self.environment.events.request.fire(
            request_type="POST",
            name=self.request_name,
            response_time=row.get("e2e_ms") or 0.0,
            response_length=0,
            response=None,
            context={**self.context(), "loadknee": row},
            exception=Exception(f"{row.get('outcome')}: {row.get('error')}"),
            start_time=row.get("start_unix_s") or time.time(),
            url=None,
        )


def _stopped_or_classified(
    exc: BaseException, when: str, *, during_body: bool = False
) -> tuple[Outcome, str]:
    """A stopped user's request is ``cancelled`` (our stop, not the server's failure: the row
    keeps it counted and says when); anything else is classified by its exception."""
    if type(exc).__name__ == "GreenletExit":
        return "cancelled", f"user stopped {when}"
    return classify_exception(exc, during_body=during_body)


def _http_reason(resp: Any, status: int) -> str:
    try:
        raw = resp.content or b""
    except Exception:
        raw = b""
    reason = ""
    if raw:
        try:
            obj = json.loads(raw)
            reason = (error_message(obj) if isinstance(obj, dict) else None) or ""
        except ValueError:
            reason = raw.decode("utf-8", "replace")
    return short_text(f"HTTP {status}" + (f" {reason}" if reason else ""), 120)


def _joined_hash(prompts: list[Prompt]) -> str:
    return hashlib.sha256("".join(p.prompt_hash for p in prompts).encode()).hexdigest()[:16]


class ChatUser(LLMUser):
    """Streams /v1/chat/completions (set ``abstract = False`` via subclassing in a locustfile)."""

    abstract = True
    endpoint = "chat"
    request_name = "chat"


class CompletionsUser(LLMUser):
    """One prompt per /v1/completions request."""

    abstract = True
    endpoint = "completions"
    request_name = "completions"


class BatchCompletionsUser(LLMUser):
    """k prompts (``--llm-batch-size`` or the class's ``batch_size``) in one /v1/completions."""

    abstract = True
    endpoint = "completions"
    request_name = "completions-batch"
    batch_size = None
