"""SSE parsing, chunk classification and usage extraction: table-driven, no network."""

from __future__ import annotations

import json

import pytest

from loadknee_locust.client.sse import StreamParser, Usage, classify, extract_usage, parse_body


def _data(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n"


CHAT_ROLE = {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}
CHAT_TOKEN = {"choices": [{"index": 0, "delta": {"content": " hi"}}]}
CHAT_FINISH = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
VLLM_USAGE = {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3}}
COMPL_TOKEN = {"choices": [{"index": 0, "text": " hi"}]}
LLAMACPP_FINAL = {
    "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2},
}


@pytest.mark.parametrize(
    ("obj", "kind", "n"),
    [
        (CHAT_ROLE, "empty", 0),
        (CHAT_TOKEN, "content", 1),
        (CHAT_FINISH, "empty", 0),
        (VLLM_USAGE, "usage", 0),
        (COMPL_TOKEN, "content", 1),
        (LLAMACPP_FINAL, "usage", 0),
        ({"choices": [{"delta": {"reasoning_content": "x"}}]}, "content", 1),
        ({"choices": [{"delta": {"tool_calls": [{"id": "1"}]}}]}, "content", 1),
        ({"choices": [{"text": "a"}, {"text": "b"}, {"text": ""}]}, "content", 2),
        ({"error": {"message": "boom"}}, "error", 0),
        ({"object": "error", "message": "bad"}, "error", 0),
        ({"usage": {"prompt_tokens": 1}}, "usage", 0),
        ([1, 2], "malformed", 0),
        ({"foo": 1}, "malformed", 0),
        ("text", "malformed", 0),
    ],
)
def test_classify(obj: object, kind: str, n: int) -> None:
    assert classify(obj) == (kind, n)


@pytest.mark.parametrize(
    ("obj", "usage"),
    [
        (VLLM_USAGE, Usage(12, 3)),
        ({"usage": None}, None),
        ({"timings": {"prompt_n": 7, "predicted_n": 9}}, Usage(7, 9)),
        ({"usage": {"prompt_tokens": 4}}, Usage(4, None)),
        ({"usage": {"prompt_tokens": "4", "completion_tokens": True}}, Usage(None, None)),
        ({}, None),
    ],
)
def test_extract_usage(obj: dict, usage: Usage | None) -> None:
    assert extract_usage(obj) == usage


def _feed(lines: list[bytes]) -> StreamParser:
    parser = StreamParser()
    for t, line in enumerate(lines):
        parser.feed_line(line, float(t))
    parser.finish()
    return parser


def test_vllm_stream_times_content_only_and_reads_final_usage() -> None:
    p = _feed(
        [
            b": keep-alive comment\n",
            _data(CHAT_ROLE),  # t=1, role-only: not a token
            b"\n",
            _data(CHAT_TOKEN),  # t=3
            b"\n",
            _data(CHAT_TOKEN),  # t=5
            b"\r\n",
            _data(CHAT_FINISH),
            _data(VLLM_USAGE),
            b"data: [DONE]\n",
        ]
    )
    assert p.content_times == [3.0, 5.0]
    assert p.chunks == 2
    assert p.done
    assert p.usage == Usage(12, 3)
    assert p.error is None and p.malformed is None


def test_llamacpp_completions_usage_on_finish_chunk_and_timings_fallback() -> None:
    p = _feed([_data(COMPL_TOKEN), _data(LLAMACPP_FINAL), b"data: [DONE]\n"])
    assert p.usage == Usage(5, 2)
    p = _feed(
        [_data(COMPL_TOKEN), _data({"choices": [], "timings": {"prompt_n": 3, "predicted_n": 1}})]
    )
    assert p.usage == Usage(3, 1)
    assert not p.done


def test_server_usage_wins_over_timings() -> None:
    p = _feed(
        [
            _data({"choices": [], "timings": {"prompt_n": 3, "predicted_n": 1}}),
            _data(VLLM_USAGE),
            _data({"choices": [], "timings": {"prompt_n": 30, "predicted_n": 10}}),
        ]
    )
    assert p.usage == Usage(12, 3)


@pytest.mark.parametrize(
    ("lines", "content", "malformed_count", "done"),
    [
        # no space after "data:" is legal SSE
        ([b'data:{"choices":[{"text":"a"}]}\n', b"data:[DONE]\n"], 1, 0, True),
        # one event split over two data lines is joined with \n
        ([b'data: {"choices":\n', b'data: [{"text":"a"}]}\n', b"\n"], 1, 0, False),
        # a broken event followed by good ones: counted once, later events still parsed
        ([b"data: {broken\n", b"\n", _data(COMPL_TOKEN), b"data: [DONE]\n"], 1, 1, True),
        # broken without blank lines: the next complete event still parses
        ([b"data: {broken\n", _data(COMPL_TOKEN), _data(COMPL_TOKEN)], 2, 1, False),
        # a half event at the end of the body is malformed
        ([_data(COMPL_TOKEN), b'data: {"choices": [\n'], 1, 1, False),
        # other SSE fields are ignored
        ([b"event: message\n", b"id: 3\n", b"retry: 10\n", _data(COMPL_TOKEN)], 1, 0, False),
    ],
)
def test_sse_framing(lines: list[bytes], content: int, malformed_count: int, done: bool) -> None:
    p = _feed(lines)
    assert (p.chunks, p.malformed_count, p.done) == (content, malformed_count, done)


def test_error_object_in_stream_is_recorded_first_one_kept() -> None:
    p = _feed(
        [
            _data(CHAT_TOKEN),
            _data({"error": {"message": "KV cache\n exhausted", "code": 500}}),
            _data({"error": "second"}),
            b"data: [DONE]\n",
        ]
    )
    assert p.error == "KV cache exhausted"
    assert p.chunks == 1


@pytest.mark.parametrize(
    ("raw", "kind", "chunks", "usage", "error"),
    [
        (
            b'{"choices":[{"message":{"role":"assistant","content":"hi"}}],'
            b'"usage":{"prompt_tokens":3,"completion_tokens":1}}',
            "content",
            1,
            Usage(3, 1),
            None,
        ),
        (b'{"choices":[{"text":"a"},{"text":"b"}]}', "content", 2, None, None),
        (b'{"choices":[]}', "empty", 0, None, None),
        (b'{"error":{"message":"nope"}}', "error", 0, None, "nope"),
        (b"<html>oops", "malformed", 0, None, "<html>oops"),
    ],
)
def test_parse_body(
    raw: bytes, kind: str, chunks: int, usage: Usage | None, error: str | None
) -> None:
    r = parse_body(raw)
    assert (r.kind, r.chunks, r.usage, r.error) == (kind, chunks, usage, error)


@pytest.mark.parametrize(
    "raw",
    [b'{"a":1}', b' {"a":1}\t', b'{"a":1} x', b"", b"  ", b"[1,2]", b"{bad", b"\xff", b"1 2"],
)
def test_fast_json_decoding_agrees_with_json_loads(raw: bytes) -> None:
    from loadknee_locust.client.sse import _loads

    try:
        expected: object = json.loads(raw)
    except ValueError:
        expected = ValueError
    try:
        got: object = _loads(raw)
    except ValueError:
        got = ValueError
    assert got == expected
