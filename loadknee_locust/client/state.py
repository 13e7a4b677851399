"""Per-process LLM state shared by the users of one Environment: prompts, model, calibration.

Kept on the Environment (attribute ``loadknee_llm_state``), never in a module global, so tests
and distributed workers each get their own; prepared once under a gevent lock: the prompt source
is built, the model found (``--llm-model`` or the first id of ``GET /v1/models``) and each
endpoint's prompt length calibrated with a few probe requests that use a private event hook, so
they are not load and never become rows. Before the first calibration, prompt words of uniform
token cost are chosen with the server's tokenize endpoint when it has one (``prompts.vocab``);
after a fixed-length source's, a few timed prefill probes at other lengths go out the same way
(``client.prefill_probes``) for ``loadknee predict``'s prefill cost per prompt token.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import gevent
import gevent.lock
from locust.contrib.fasthttp import FastHttpSession
from locust.event import EventHook

from loadknee_locust.client import payloads
from loadknee_locust.client.credentials import authorization, has_url_credentials
from loadknee_locust.client.keepalive import ClosingServers
from loadknee_locust.client.prefill_probes import probe_prefill
from loadknee_locust.client.reconnect import check_liveness_without_yielding, install_stale_retry
from loadknee_locust.client.sse import parse_body, short_text
from loadknee_locust.client.tokenize_probe import server_vocabulary
from loadknee_locust.plugin.options import LlmOptions, llm_options, option_specs
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

log = logging.getLogger(__name__)

_STATE_ATTR = "loadknee_llm_state"


class LLMState:
    """What all users of one process share: options, prompt source, model, calibrations."""

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.lock = gevent.lock.RLock()
        self._users = 0
        self._stopping = False
        self.stale_connection_retries = 0
        self.closing_servers = ClosingServers()  # servers whose sockets are never reused
        self.stream_stamps: dict[str, int] = {}  # streams by how their lines were stamped
        #: requests that are not load, by kind (calibration_probes, tokenize, model_discovery):
        #: with them the server's own request count reconciles with the run directory
        self.setup_requests: dict[str, int] = {}
        self._warned_both = False
        self.options = llm_options(environment)
        self._load_options(self.options)

    def _load_options(self, options: LlmOptions) -> None:
        """(Re)start from ``options``: the web UI may change them between runs."""
        self.options = options
        runner = getattr(self.environment, "runner", None)
        worker_index = getattr(runner, "worker_index", 0) or 0
        # each worker samples its own sequence from the log
        self.source_options = SourceOptions.from_options(
            options, seed_offset=1_000_003 * worker_index
        )
        self.model = options.model
        self.model_error: str | None = None
        self._next_model_try = 0.0
        self.body_options: payloads.BodyOptions | None = None
        old = getattr(self, "source", None)
        if isinstance(old, LogReplaySource):
            old.close()
        self.source: FixedLengthSource | LogReplaySource | None = None
        self.source_error: str | None = None
        self._calibrated: set[str] = set()
        self._vocabulary_chosen = False
        #: [prompt tokens, ms] of each answered prefill probe (``client.prefill_probes``)
        self.prefill_probes: list[list[float]] = []
        try:
            self._extra = payloads.parse_extra_body(options.extra_body)
        except ValueError as exc:
            self.source_error = str(exc)
            log.error("loadknee: %s", exc)

    def stop_test(self) -> None:
        """No prompts, no test: quit the runner once (from a fresh greenlet), exit code 1."""
        if self._stopping:
            return
        self._stopping = True
        self.environment.process_exit_code = 1
        runner = getattr(self.environment, "runner", None)
        if runner is not None:
            log.error("loadknee: stopping the test: %s", self.source_error)
            # a fresh greenlet: quit() kills the users, and this runs inside one
            gevent.spawn(runner.quit)

    def count_stream_stamps(self, mode: str) -> None:
        """One stream read, stamped ``mode`` (``streamread.StampingMode``), for run.json."""
        self.stream_stamps[mode] = self.stream_stamps.get(mode, 0) + 1

    def count_stale_retry(self) -> None:
        """A request resent because its reused keep-alive socket was already closed."""
        if self.stale_connection_retries == 0:
            log.info("loadknee: the server closes keep-alive connections; resending such requests")
        self.stale_connection_retries += 1

    def next_user_id(self) -> int:
        self._users += 1
        return self._users

    def auth_headers(self) -> dict[str, str]:
        """Bearer header from the named env var, read at use time (never stored or logged); with
        no key, Basic from the host URL's credentials (plugin/credentials.py: the one rule)."""
        env = self.options.api_key_env
        key = os.environ.get(env) if env else None
        if key and not self._warned_both and has_url_credentials(self.environment):
            self._warned_both = True
            log.warning(
                "loadknee: both an API key and user:password in the host URL: the API key is "
                "sent (Bearer); the URL's credentials are not sent"
            )
        return authorization(key, self.environment)

    def ensure_source(self) -> None:
        if self.source is None and self.source_error is None:
            try:
                if self.options.replay_curve:
                    from loadknee_locust.curve.replay import build_curve_source

                    self.source = build_curve_source(self.options, self.environment)
                else:
                    self.source = build_source(self.source_options)
            except Exception as exc:  # any bad input: one message and the test stops, no hang
                # said once, by stop_test
                self.source_error = "cannot build the prompt source: " + (
                    str(exc) or type(exc).__name__
                )

    def prepare(self, host: str, endpoint: Endpoint) -> None:
        """Build the source, find the model, calibrate ``endpoint``: once, under the lock."""
        with self.lock:
            current = llm_options(self.environment)
            if current is not self.options:
                if _request_part(current) != _request_part(self.options):
                    log.info("loadknee: options changed; rebuilding prompts and calibration")
                    self._load_options(current)
                else:  # a new sweep plan, say: prompts and calibration still hold
                    self.options = current
            self.ensure_source()
            if self.source is None:
                return
            if not self.model and time.monotonic() >= self._next_model_try:
                self._discover_model(host)
            if self.body_options is None or self.body_options.model != self.model:
                self.body_options = payloads.BodyOptions(
                    model=self.model,
                    stream=self.options.stream,
                    temperature=self.options.temperature,
                    ignore_eos=self.options.ignore_eos,
                    extra=self._extra,
                )
            if endpoint not in self._calibrated and self.model:
                self._calibrated.add(endpoint)
                self._calibrate(host, endpoint)

    def _session(self, host: str) -> FastHttpSession:
        # a private event hook: probes and discovery are not load and must not become rows
        hook = EventHook()
        hook.add_listener(self._count_setup_request)
        session = FastHttpSession(
            base_url=host,
            request_event=hook,
            user=None,
            network_timeout=self.options.request_timeout,
            connection_timeout=self.options.request_timeout,
        )
        install_stale_retry(session.client)
        try:
            pool = session.client.clientpool.get_client(host)._connection_pool
        except Exception:  # an odd host: the probe itself will say what is wrong
            pool = None
        if pool is not None:
            check_liveness_without_yielding(pool)
            self.closing_servers.install(pool)
        return session

    def _count_setup_request(self, name: Any = None, **_: Any) -> None:
        path = str(name or "")
        if path.endswith("/models"):
            kind = "model_discovery"
        elif path.endswith("/tokenize"):
            kind = "tokenize"
        else:
            kind = "calibration_probes"
        self.setup_requests[kind] = self.setup_requests.get(kind, 0) + 1

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
        if not self._vocabulary_chosen:  # once per source, before its first calibration
            self._vocabulary_chosen = True
            vocabulary = server_vocabulary(session, self.model, self.auth_headers())
            if vocabulary is not None:
                source.synth.set_vocabulary(vocabulary)
        probe_options = payloads.BodyOptions(
            model=self.model, stream=False, temperature=0.0, ignore_eos=False
        )

        def timed_probe(words: int) -> tuple[int, float]:
            """One probe of ``words`` filler words: the server's prompt tokens, its wall ms."""
            body = build_body(endpoint, probe_options, [source.synth.probe(words)])
            start = time.perf_counter()
            resp = session.post(
                payloads.CHAT_PATH if endpoint == "chat" else payloads.COMPLETIONS_PATH,
                data=payloads.encode(body),  # type: ignore[arg-type]  # bytes go out as-is
                headers={"Content-Type": "application/json", **self.auth_headers()},
            )
            ms = (time.perf_counter() - start) * 1000.0
            if resp.status_code != 200:
                raise ValueError(f"probe got HTTP {resp.status_code}")
            result = parse_body(resp.content or b"")
            if result.usage is None or result.usage.prompt_tokens is None:
                raise ValueError("the server reports no usage.prompt_tokens")
            return result.usage.prompt_tokens, ms

        cal: Calibration
        try:
            cal = calibrate(lambda words: timed_probe(words)[0], source.calibration_targets)
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
            if isinstance(source, FixedLengthSource):  # for predict's prefill cost
                probes = probe_prefill(timed_probe, cal.words_for, source.calibration_targets[0])
                self.prefill_probes = [[tokens, round(ms, 2)] for tokens, ms in probes]
                log.info("loadknee: %s: %d prefill probes kept", endpoint, len(probes))
        source.synth.set_calibration(endpoint, cal)

    def info(self) -> dict[str, Any]:
        self.ensure_source()
        info: dict[str, Any] = (
            self.source.info() if self.source else {"kind": "error", "error": self.source_error}
        )
        info["model"] = self.model or None
        info["stale_connection_retries"] = self.stale_connection_retries
        closing = self.closing_servers.names()
        if closing:
            info["servers_closing_after_response"] = closing
        if self.stream_stamps:
            info["stream_stamps"] = dict(sorted(self.stream_stamps.items()))
        if self.setup_requests:
            info["setup_requests"] = dict(sorted(self.setup_requests.items()))
        if self.model_error:
            info["model_error"] = self.model_error
        if self.prefill_probes:
            info["prefill_probes"] = [list(p) for p in self.prefill_probes]
        return info


def _request_part(options: LlmOptions) -> tuple[Any, ...]:
    """The options that shape prompts and requests (a change means preparing again)."""
    return tuple(
        getattr(options, spec.name)
        for spec in option_specs()
        if spec.group in ("target", "prompts")
    )


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


def build_body(endpoint: Endpoint, options: payloads.BodyOptions, prompts: list[Prompt]) -> dict:
    if endpoint == "chat":
        return payloads.chat_body(options, prompts[0])
    return payloads.completions_body(options, prompts)
