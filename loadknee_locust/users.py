"""Locust user classes that drive an OpenAI-compatible LLM server and time every stream exactly.

``LLMUser`` (abstract) sends one request per task iteration, closed loop (no wait), and fires
exactly ONE Locust ``request`` event per request: ``request_type="POST"``, ``name`` = ``chat`` /
``completions`` / ``completions-batch``, ``response_time`` = the real end-to-end time in ms (not
the time to headers), ``response_length`` = completion tokens, ``exception`` set on failure, and
``context["loadknee"]`` = the row for ``requests.csv`` (see ``outcome.request_row``).

Streams are read with ``resp.stream.readline(b"\\n")`` (Locust's iter_content/iter_lines buffer
1 KB and blur TTFT), each line stamped with ``perf_counter`` as it arrives, and read to the end
after ``[DONE]`` so the connection goes back to the pool clean. Every exception is caught inside
the ``catch_response`` block, so a failure is a row, never a silent loss.

Per-process state (prompt source, calibration, discovered model) lives on the Environment
(:func:`llm_state`), never in a module global, and is prepared once under a gevent lock.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from typing import Any, ClassVar

import gevent
import gevent.lock
from locust import FastHttpUser, task
from locust.contrib.fasthttp import FastHttpSession
from locust.event import EventHook
from locust.exception import StopUser

from loadknee_locust import payloads
from loadknee_locust.outcome import Observation, classify_exception, request_row
from loadknee_locust.prompts import (
    FixedLengthSource,
    LogReplaySource,
    Prompt,
    SourceOptions,
    build_source,
    calibrate,
)
from loadknee_locust.prompts.calibrate import Calibration, assumed
from loadknee_locust.prompts.model import Endpoint
from loadknee_locust.sse import StreamParser, error_message, parse_body, short_text

log = logging.getLogger(__name__)

_STATE_ATTR = "loadknee_llm_state"
_CONNECT_ERROR_BACKOFF_S = 0.1  # a refused connection fails in µs: do not spin on a dead server


def _opt(environment: Any, name: str, default: Any) -> Any:
    parsed = getattr(environment, "parsed_options", None)
    return getattr(parsed, name, default) if parsed is not None else default


class LLMState:
    """What all users of one process share: options, prompt source, model, calibrations."""

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.lock = gevent.lock.RLock()
        runner = getattr(environment, "runner", None)
        worker_index = getattr(runner, "worker_index", 0) or 0
        self.source_options = SourceOptions.from_parsed(
            environment.parsed_options, seed_offset=1_000_003 * worker_index
        )
        self.api_key_env: str = _opt(environment, "llm_api_key_env", "OPENAI_API_KEY")
        self.timeout_s = float(_opt(environment, "llm_request_timeout", 120.0))
        self.stream = not _opt(environment, "llm_no_stream", False)
        self.batch_size = int(_opt(environment, "llm_batch_size", 1))
        self.model: str = _opt(environment, "llm_model", "") or ""
        self.model_error: str | None = None
        self._next_model_try = 0.0
        self.body_options: payloads.BodyOptions | None = None
        self.source: FixedLengthSource | LogReplaySource | None = None
        self.source_error: str | None = None
        self._calibrated: set[str] = set()
        self._users = 0
        self._stopping = False

    def stop_test(self) -> None:
        """No prompts, no test: quit the runner once (from a fresh greenlet), exit code 1."""
        if self._stopping:
            return
        self._stopping = True
        self.environment.process_exit_code = 1
        runner = getattr(self.environment, "runner", None)
        if runner is not None:
            log.error("loadknee: stopping the test: %s", self.source_error)
            gevent.spawn(runner.quit)

    def next_user_id(self) -> int:
        self._users += 1
        return self._users

    def auth_headers(self) -> dict[str, str]:
        """Bearer header from the named env var, read at use time (never stored or logged)."""
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        return {"Authorization": f"Bearer {key}"} if key else {}

    def ensure_source(self) -> None:
        if self.source is None and self.source_error is None:
            try:
                self.source = build_source(self.source_options)
            except (OSError, ValueError) as exc:
                self.source_error = str(exc)
                log.error("loadknee: cannot build the prompt source: %s", exc)

    def prepare(self, host: str, endpoint: Endpoint) -> None:
        """Build the source, find the model, calibrate ``endpoint``: once, under the lock."""
        with self.lock:
            self.ensure_source()
            if self.source is None:
                return
            if not self.model and time.monotonic() >= self._next_model_try:
                self._discover_model(host)
            if self.body_options is None or self.body_options.model != self.model:
                self.body_options = payloads.BodyOptions(
                    model=self.model,
                    stream=self.stream,
                    temperature=float(_opt(self.environment, "llm_temperature", 0.0)),
                    ignore_eos=not _opt(self.environment, "llm_no_ignore_eos", False),
                    extra=payloads.parse_extra_body(_opt(self.environment, "llm_extra_body", "")),
                )
            if endpoint not in self._calibrated and self.model:
                self._calibrated.add(endpoint)
                self._calibrate(host, endpoint)

    def _session(self, host: str) -> FastHttpSession:
        # a private event hook: probes and discovery are not load and must not become rows
        return FastHttpSession(
            base_url=host,
            request_event=EventHook(),
            user=None,
            network_timeout=self.timeout_s,
            connection_timeout=self.timeout_s,
        )

    def _discover_model(self, host: str) -> None:
        try:
            resp = self._session(host).get("/v1/models", headers=self.auth_headers())
            resp.raise_for_status()
            self.model = str(resp.json()["data"][0]["id"])
            self.model_error = None
            log.info("loadknee: model %r (from /v1/models)", self.model)
        except Exception as exc:  # any failure: requests go out without a model and say why
            self.model_error = short_text(f"model discovery failed: {exc!r}")
            self._next_model_try = time.monotonic() + 5.0
            log.warning("loadknee: %s; set --llm-model", self.model_error)

    def _calibrate(self, host: str, endpoint: Endpoint) -> None:
        source = self.source
        assert source is not None and self.body_options is not None
        needs = isinstance(source, FixedLengthSource) or source.index.kinds.get("lengths")
        if not needs:
            return
        if not self.source_options.calibrate:
            return
        session = self._session(host)
        probe_options = payloads.BodyOptions(
            model=self.model, stream=False, temperature=0.0, ignore_eos=False
        )

        def measure(words: int) -> int:
            body = _build_body(endpoint, probe_options, [source.synth.probe(words)])
            resp = session.post(
                payloads.CHAT_PATH if endpoint == "chat" else payloads.COMPLETIONS_PATH,
                data=payloads.encode(body),  # type: ignore[arg-type]  # bytes go out as-is
                headers={"Content-Type": "application/json", **self.auth_headers()},
            )
            if resp.status_code != 200:
                raise ValueError(f"probe got HTTP {resp.status_code}")
            result = parse_body(resp.content or b"")
            if result.usage is None or result.usage.prompt_tokens is None:
                raise ValueError("the server reports no usage.prompt_tokens")
            return result.usage.prompt_tokens

        cal: Calibration
        try:
            cal = calibrate(measure, source.calibration_targets)
        except Exception as exc:
            fallback = source.synth.default_calibration()
            cal = assumed(fallback.overhead_tokens, short_text(f"calibration failed: {exc}"))
            log.warning("loadknee: %s %s; prompt lengths are estimates", endpoint, cal.error)
        else:
            log.info(
                "loadknee: %s calibrated: %.1f overhead tokens, %.3f tokens/word, %d probes",
                endpoint,
                cal.overhead_tokens,
                cal.tokens_per_word,
                cal.probes,
            )
        source.synth.set_calibration(endpoint, cal)

    def info(self) -> dict[str, Any]:
        self.ensure_source()
        info: dict[str, Any] = (
            self.source.info() if self.source else {"kind": "error", "error": self.source_error}
        )
        info["model"] = self.model or None
        if self.model_error:
            info["model_error"] = self.model_error
        return info


def llm_state(environment: Any) -> LLMState:
    """The process's shared LLM state, created on first use and kept on the Environment."""
    state = getattr(environment, _STATE_ATTR, None)
    if state is None:
        state = LLMState(environment)
        setattr(environment, _STATE_ATTR, state)
    return state


def prompt_source_info(environment: Any) -> dict[str, Any]:
    """For run.json: source kind, targets, log sha256, bad-line counts, calibration, model."""
    return llm_state(environment).info()


def _build_body(endpoint: Endpoint, options: payloads.BodyOptions, prompts: list[Prompt]) -> dict:
    if endpoint == "chat":
        return payloads.chat_body(options, prompts[0])
    return payloads.completions_body(options, prompts)


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
        timeout = float(_opt(environment, "llm_request_timeout", 120.0))
        self.network_timeout = timeout  # per socket read: the longest prefill or token gap
        self.connection_timeout = timeout
        super().__init__(environment)
        self.llm = llm_state(environment)
        self.user_id = self.llm.next_user_id()
        self._backoff = 0.0

    def wait_time(self) -> float:
        """Closed loop: 0 s between requests (a short back-off only after a refused connect)."""
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
        k = self.batch_size if self.batch_size is not None else self.llm.batch_size
        source = self.llm.source
        assert source is not None
        return [source.next_prompt(self.endpoint) for _ in range(max(1, k))]

    def send_request(self) -> dict[str, Any]:
        """Send one request, fire its one event, return its row."""
        llm = self.llm
        request_id = uuid.uuid4().hex[:16]
        stream = llm.stream
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
            assert llm.body_options is not None
            data = payloads.encode(_build_body(self.endpoint, llm.body_options, prompts))
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
        obs = Observation(start=time.perf_counter())
        with self.client.request(
            "POST",
            path,
            name=self.request_name,
            data=data,  # type: ignore[arg-type]  # bytes go out as-is
            headers=headers,
            stream=stream,
            catch_response=True,
        ) as resp:
            try:
                self._read_response(resp, obs, stream)
            except BaseException as exc:  # GreenletExit too: the user was stopped mid-request
                obs.end = time.perf_counter()
                if obs.failure is None:
                    obs.failure, obs.failure_reason = classify_exception(
                        exc, during_body=obs.http_status is not None
                    )
                    if type(exc).__name__ == "GreenletExit":
                        obs.failure, obs.failure_reason = "incomplete", "user stopped mid-request"
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
                self._backoff = _CONNECT_ERROR_BACKOFF_S
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

    @staticmethod
    def _read_stream(resp: Any, obs: Observation) -> None:
        parser = StreamParser()
        readline = resp.stream.readline
        feed = parser.feed_line
        clock = time.perf_counter
        try:
            while line := readline(b"\n"):
                t = clock()
                feed(line, t)
                if parser.done:
                    obs.end = t  # the response is complete at [DONE]; the rest is hygiene
                    while readline(b"\n"):  # to the end, so the socket is reusable
                        pass
                    break
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
        resp: Any,
        obs: Observation,
        base: dict[str, Any],
        stream: bool,
        k: int,
        targets_in: int | None,
        targets_out: int | None,
    ) -> dict[str, Any]:
        row, failure = request_row(
            obs,
            base=base,
            stream=stream,
            batch_size=k,
            target_input_tokens=targets_in,
            target_output_tokens=targets_out,
        )
        meta = resp.request_meta
        meta["response_time"] = row["e2e_ms"]
        meta["response_length"] = row["completion_tokens"] or 0
        meta["context"] = {**(meta.get("context") or {}), "loadknee": row}
        if failure is None:
            resp.success()
        else:
            resp.failure(failure)
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
        }
        self.environment.events.request.fire(
            request_type="POST",
            name=self.request_name,
            response_time=0.0,
            response_length=0,
            response=None,
            context={**self.context(), "loadknee": row},
            exception=Exception(f"client_error: {reason}"),
            start_time=now,
            url=None,
        )
        self._backoff = _CONNECT_ERROR_BACKOFF_S
        return row


def _http_reason(resp: Any, status: int) -> str:
    try:
        raw = resp.content or b""
    except Exception:
        raw = b""
    reason = ""
    if raw:
        try:
            import json

            obj = json.loads(raw)
            reason = (error_message(obj) if isinstance(obj, dict) else None) or ""
        except ValueError:
            reason = raw.decode("utf-8", "replace")
    return short_text(f"HTTP {status}" + (f" {reason}" if reason else ""), 120)


def _joined_hash(prompts: list[Prompt]) -> str:
    import hashlib

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
