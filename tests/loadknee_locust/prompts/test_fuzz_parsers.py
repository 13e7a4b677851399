"""Property-based fuzzing (hypothesis) of the SSE parser and the prompt-log readers: any input
ends as a result or a ValueError with a reason, never another exception or a hang, and a
well-formed stream is read exactly (issue 13, item 9)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadknee_core.logentry import entry_from_mapping
from loadknee_core.logindex import index_log, read_entry
from loadknee_locust.client.sse import StreamParser, parse_body

FAST = settings(max_examples=150, deadline=None)
FILES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)


@FAST
@given(st.lists(st.binary(max_size=80), max_size=30))
def test_any_lines_are_parsed_without_raising(lines: list[bytes]) -> None:
    parser = StreamParser()
    for i, line in enumerate(lines):
        parser.feed_line(line, float(i))
    parser.finish()
    assert parser.chunks >= len(parser.content_times) >= 0
    assert parser.content_times == sorted(parser.content_times)
    assert parser.malformed is None or len(parser.malformed) <= 80


@FAST
@given(st.binary(max_size=400))
def test_any_body_is_parsed_without_raising(raw: bytes) -> None:
    result = parse_body(raw)
    assert result.kind in ("ok", "error", "malformed", "empty")


@FAST
@given(
    st.lists(st.text(min_size=1, max_size=8).filter(lambda s: s.strip()), min_size=1, max_size=20),
    st.integers(min_value=1, max_value=5000),
    st.booleans(),
)
def test_a_well_formed_stream_is_read_exactly(
    tokens: list[str], prompt_tokens: int, crlf: bool
) -> None:
    end = b"\r\n" if crlf else b"\n"
    events = [{"object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": {"content": t}}]} for t in tokens]  # fmt: skip
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(tokens)}
    events.append({"object": "chat.completion.chunk", "choices": [], "usage": usage})
    parser = StreamParser()
    t = 0.0
    for event in events:
        t += 1.0
        parser.feed_line(b"data: " + json.dumps(event).encode() + end, t)
        parser.feed_line(end, t)
    parser.feed_line(b"data: [DONE]" + end, t)
    parser.finish()
    assert parser.done and parser.malformed is None and parser.error is None
    assert parser.chunks == len(tokens) == len(parser.content_times)
    assert parser.usage is not None
    assert (parser.usage.prompt_tokens, parser.usage.completion_tokens) == (
        prompt_tokens,
        len(tokens),
    )


@FAST
@given(json_values)
def test_any_record_is_an_entry_or_a_value_error(obj: object) -> None:
    try:
        entry_from_mapping(obj)
    except ValueError as exc:
        assert str(exc)  # a reason, never an empty message


def _index_and_read(content: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"log{suffix}"
        path.write_bytes(content)
        try:
            index = index_log(path)
        except ValueError as exc:
            assert str(exc)
            return
        assert index.valid + index.bad_count == index.records
        with open(path, "rb") as f:
            for i in range(index.valid):
                read_entry(f, index, i)  # every indexed record reads back


@FILES
@given(st.binary(max_size=600), st.sampled_from([".jsonl", ".csv"]))
def test_any_file_content_is_indexed_or_refused(content: bytes, suffix: str) -> None:
    _index_and_read(content, suffix)


@FILES
@given(
    st.lists(st.text(max_size=30), min_size=1, max_size=8),
    st.sampled_from([b"\n", b"\r\n", b"\r"]),
)
def test_csv_logs_with_any_line_ending_are_indexed_or_refused(
    prompts: list[str], newline: bytes
) -> None:
    lines = [b"prompt,max_tokens"] + [
        json.dumps(p).encode() + b"," + str(1 + i).encode() for i, p in enumerate(prompts)
    ]
    _index_and_read(newline.join(lines) + newline, ".csv")


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_a_plain_csv_log_reads_every_record(newline: bytes, tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_bytes(newline.join([b"prompt,max_tokens", b"hello,3", b'"a, b",4']) + newline)
    index = index_log(path)
    assert index.valid == 2 and index.bad_count == 0
