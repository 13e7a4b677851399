"""Pure parts of the user classes: request bodies, outcome precedence, rows, exception mapping."""

from __future__ import annotations

import json

import pytest

from loadknee_core.contract import OUTCOMES, REQUEST_COLUMNS
from loadknee_locust.client import payloads
from loadknee_locust.client.outcome import Observation, classify_exception, request_row
from loadknee_locust.client.sse import Usage
from loadknee_locust.prompts.model import Prompt

PROMPT = Prompt("hello", None, 8, True, 10, 8, "abc")
CAP_ONLY = Prompt("hello", None, 8, False, None, None, "abc")
REPLAYED = Prompt(
    None,
    ({"role": "user", "content": "a"}, {"role": "user", "content": "b"}),
    5,
    False,
    None,
    None,
    "h",
    "pre",
)


# -- bodies --------------------------------------------------------------------------------


def test_chat_body_streams_with_usage_pins_output_and_merges_extra_last() -> None:
    options = payloads.BodyOptions(model="m", extra={"temperature": 0.7, "top_p": 1})
    body = payloads.chat_body(options, PROMPT)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["ignore_eos"] is True and body["min_tokens"] == body["max_tokens"] == 8
    assert body["temperature"] == 0.7 and body["top_p"] == 1
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert json.loads(payloads.encode(body)) == body


@pytest.mark.parametrize(
    ("options", "prompt", "absent"),
    [
        (payloads.BodyOptions(model="m", ignore_eos=False), PROMPT, {"ignore_eos", "min_tokens"}),
        (payloads.BodyOptions(model="m"), CAP_ONLY, {"ignore_eos", "min_tokens"}),
        (payloads.BodyOptions(model="m", stream=False), PROMPT, {"stream_options"}),
    ],
)
def test_optional_fields_are_left_out(options, prompt: Prompt, absent: set[str]) -> None:
    assert not absent & set(payloads.chat_body(options, prompt))


def test_completions_body_batches_prompts_and_joins_replayed_messages() -> None:
    options = payloads.BodyOptions(model="m")
    assert payloads.completions_body(options, [PROMPT])["prompt"] == "hello"
    assert payloads.completions_body(options, [PROMPT, PROMPT])["prompt"] == ["hello", "hello"]
    assert payloads.completions_body(options, [REPLAYED])["prompt"] == "pre\na\nb"
    assert payloads.chat_messages(REPLAYED)[0] == {"role": "system", "content": "pre"}
    with pytest.raises(ValueError):
        payloads.completions_body(options, [])


@pytest.mark.parametrize(
    ("text", "ok"), [("", True), (' {"a": 1} ', True), ("[1]", False), ("{", False)]
)
def test_extra_body_must_be_a_json_object(text: str, ok: bool) -> None:
    if ok:
        assert isinstance(payloads.parse_extra_body(text), dict)
    else:
        with pytest.raises(ValueError, match="--llm-extra-body"):
            payloads.parse_extra_body(text)


# -- outcomes ------------------------------------------------------------------------------

BASE = {"request_id": "r1", "user_id": 1, "endpoint": "chat", "stream": True, "start_unix_s": 100.0}


def _obs(**kw) -> Observation:
    defaults = dict(
        start=0.0, end=0.5, http_status=200, content_times=[0.1, 0.2], chunks=2,
        usage=Usage(10, 8), complete=True,
    )  # fmt: skip
    defaults.update(kw)
    return Observation(**defaults)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("obs", "outcome", "locust_failure"),
    [
        (_obs(), "ok", False),
        (_obs(usage=Usage(10, 7)), "length_mismatch", False),
        (_obs(usage=Usage(11, 8)), "length_mismatch", False),
        (_obs(complete=False), "incomplete", True),
        (_obs(chunks=0, content_times=[]), "empty_response", True),
        (_obs(malformed="{x"), "malformed", True),
        (_obs(malformed="{x", stream_error="boom"), "stream_error", True),
        (_obs(failure="timeout", failure_reason="t", stream_error="boom"), "timeout", True),
        (
            _obs(failure="http_error", failure_reason="HTTP 503", http_status=503),
            "http_error",
            True,
        ),
    ],
)
def test_outcome_precedence_and_locust_failure(
    obs: Observation, outcome: str, locust_failure: bool
) -> None:
    row, failure = request_row(
        obs, base=BASE, stream=True, batch_size=1, target_input_tokens=10, target_output_tokens=8
    )
    assert row["outcome"] == outcome in OUTCOMES
    assert (failure is not None) == locust_failure
    assert set(row) <= set(REQUEST_COLUMNS)
    assert row["end_unix_s"] == pytest.approx(100.5) and row["e2e_ms"] == pytest.approx(500)


def test_row_for_a_good_stream() -> None:
    row, failure = request_row(
        _obs(), base=BASE, stream=True, batch_size=1, target_input_tokens=10, target_output_tokens=8
    )
    assert failure is None
    assert row["ttft_ms"] == pytest.approx(100) and row["tpot_ms"] == pytest.approx(400 / 7)
    assert row["length_ok"] is True and row["usage_source"] == "server"
    assert row["error"] is None


@pytest.mark.parametrize(
    ("stream", "chunks", "source", "tokens"),
    [(True, 3, "estimate", 3), (False, 1, "none", None), (True, 0, "none", None)],
)
def test_usage_estimate_only_from_stream_chunks(
    stream: bool, chunks: int, source: str, tokens
) -> None:
    obs = _obs(usage=None, chunks=chunks, content_times=[0.1] * chunks)
    row, _ = request_row(
        obs, base=BASE, stream=stream, batch_size=1, target_input_tokens=10, target_output_tokens=8
    )
    assert (row["usage_source"], row["completion_tokens"], row["length_ok"]) == (
        source,
        tokens,
        None,
    )
    if not stream:
        assert row["ttft_ms"] is None


class HTTPConnectionClosed(Exception):  # geventhttpclient's, matched by name
    pass


class Timeout(BaseException):  # gevent.Timeout's name
    pass


class RetriesExceeded(Exception):
    def __init__(self, original: BaseException) -> None:
        super().__init__("retries")
        self.original = original


@pytest.mark.parametrize(
    ("exc", "during_body", "outcome"),
    [
        (TimeoutError("timed out"), False, "timeout"),
        (TimeoutError(), True, "timeout"),
        (Timeout(), True, "timeout"),
        (RetriesExceeded(TimeoutError("timed out")), False, "timeout"),
        (ConnectionRefusedError(111, "refused"), False, "connect_error"),
        (RetriesExceeded(ConnectionRefusedError(111, "refused")), False, "connect_error"),
        (HTTPConnectionClosed("closed"), False, "connect_error"),
        (HTTPConnectionClosed("closed"), True, "incomplete"),
        (ConnectionResetError(104, "reset"), True, "incomplete"),
        (KeyError("bug"), True, "client_error"),
    ],
)
def test_exception_mapping(exc: BaseException, during_body: bool, outcome: str) -> None:
    got, reason = classify_exception(exc, during_body=during_body)
    assert got == outcome and reason and "\n" not in reason
