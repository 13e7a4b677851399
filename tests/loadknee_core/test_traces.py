"""Trace readers: each format's fixture read with its times and lengths right, bad lines named."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from loadknee_core.logindex import index_log, read_entry
from loadknee_core.traces import TraceRecord, read_trace
from loadknee_core.tracetime import time_seconds
from tests.support.paths import DATA

DATA = DATA / "traces"
T0 = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC).timestamp()  # the log fixtures' first start
AZURE_T0 = datetime(2023, 11, 16, 18, 15, 46, 680590, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "unit", "want"),
    [
        (1767603600, "auto", T0),  # epoch seconds
        (1767603600000, "auto", T0),  # epoch ms, told by its size
        (1767603600000000, "auto", T0),  # µs
        (1767603600000000000, "auto", T0),  # ns
        ("1767603600.5", "auto", T0 + 0.5),  # a numeric CSV cell
        (1500, "auto", 1500.0),  # small: relative seconds
        (1500, "ms", 1.5),  # unless the unit says otherwise
        ("2026-01-05T09:00:00Z", "auto", T0),
        ("2026-01-05T10:00:00+01:00", "auto", T0),
        ("2026-01-05 09:00:00.2500000", "auto", T0 + 0.25),  # naive, 7 digits: read in tz (UTC)
        ("2026-01-05T09:00:00.123456789Z", "auto", T0 + 0.123456),
    ],
)
def test_a_logged_time_in_seconds(text: object, unit: str, want: float) -> None:
    assert time_seconds(text, unit=unit, tz=UTC) == pytest.approx(want, abs=1e-6)  # type: ignore[arg-type]


def test_a_naive_time_is_read_in_the_zone_given() -> None:
    shanghai = timezone(timedelta(hours=8))
    assert time_seconds("2026-01-05 17:00:00", tz=shanghai) == pytest.approx(T0)


@pytest.mark.parametrize("bad", ["", "soon", None, True, float("nan"), "2026-13-40 00:00"])
def test_an_unreadable_time_is_a_value_error_without_the_value(bad: object) -> None:
    with pytest.raises(ValueError) as err:
        time_seconds(bad)
    assert "soon" not in str(err.value)


def _rel(records: list[TraceRecord], t0: float) -> list[tuple]:
    return [
        (r.line, round(r.start_s - t0, 6), r.duration_s, r.input_tokens, r.output_tokens)
        for r in records
    ]


# (file, format found, t0, [(line, start from t0, duration, input, output)], bad lines, failed)
CASES = [
    (
        "mooncake.jsonl", "mooncake", 0.0,
        [(1, 0.0, None, 6955, 52), (2, 1.2, None, 6472, 26), (4, 2.5, None, 1024, 300),
         (6, 4.0, None, 8000, 12)],
        [3], 0,
    ),
    (
        "azure.csv", "azure", AZURE_T0,
        [(2, 0.0, None, 374, 44), (3, 4.314579, None, 396, 109), (4, 4.522637, None, 879, 1),
         (6, 7.0, None, None, None), (7, 60.0, None, 2048, 256)],
        [5, 6], 0,
    ),
    (
        "burstgpt.csv", "burstgpt", 0.0,
        [(2, 5.0, None, 472, 18), (3, 45.0, None, 1087, None), (4, 118.0, None, 417, 276),
         (6, 120.0, None, 3006, 118)],
        [5], 1,
    ),
    (
        "log.jsonl", "log", T0,
        [(1, 0.0, 1.5, 120, 40), (2, 1.0, 2.5, 300, 60), (3, 2.0, 0.5, 80, 8),
         (4, 1.5, 1.0, 50, 5), (5, 4.0, None, 10, 1)],
        [5, 6, 7], 0,
    ),
    (
        "log.csv", "log", T0,
        [(2, 0.0, 2.0, 100, 10), (3, 1.0, 1.0, 200, 20), (5, 2.25, 0.5, None, None)],
        [5], 0,
    ),
]  # fmt: skip


@pytest.mark.parametrize(("name", "fmt", "t0", "want", "bad_lines", "failed"), CASES)
def test_each_fixture_reads_its_times_and_lengths(
    name: str, fmt: str, t0: float, want: list[tuple], bad_lines: list[int], failed: int
) -> None:
    read, records = read_trace(DATA / name, tz=UTC)
    got = list(records)
    assert read.format == fmt
    assert _rel(got, t0) == want
    assert [line for line, _ in read.bad_samples] == bad_lines
    assert read.bad_count == len(bad_lines)
    assert read.used == len(want) and read.failed == failed
    summary = read.summary()
    assert all(f"line {n}" in summary for n in bad_lines)
    assert "SECRET-TEXT" not in summary and "soon" not in summary


def test_a_forced_format_that_the_header_does_not_fit_is_refused() -> None:
    with pytest.raises(ValueError, match="ContextTokens"):
        read_trace(DATA / "burstgpt.csv", "azure")
    with pytest.raises(ValueError, match="JSON Lines"):
        read_trace(DATA / "azure.csv", "mooncake")


def test_a_forced_mooncake_format_names_records_that_are_not_mooncake(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": 1000, "input_length": 5, "output_length": 1}\n{"ts": 3}\n')
    read, records = read_trace(path, "mooncake")
    assert [r.start_s for r in records] == [1.0]
    # words are the product: the reason a user reads for each unreadable trace line
    assert read.bad_samples == [(2, "timestamp: time is missing or not a number")]


def test_a_unit_override_applies_to_numeric_log_times(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"time": 1000, "input_tokens": 5}\n{"time": 2500, "input_tokens": 5}\n')
    _, records = read_trace(path, unit="ms")
    assert [r.start_s for r in records] == [1.0, 2.5]


def test_a_csv_log_without_a_time_column_is_refused_up_front(tmp_path: Path) -> None:
    path = tmp_path / "prompts.csv"
    path.write_text("prompt,max_tokens\nhello,5\n")
    with pytest.raises(ValueError, match="no time column"):
        read_trace(path)


def test_a_gzipped_trace_reads_as_the_plain_one(tmp_path: Path) -> None:
    for name in ("azure.csv", "mooncake.jsonl"):
        packed = tmp_path / f"{name}.gz"
        packed.write_bytes(gzip.compress((DATA / name).read_bytes()))
        read, records = read_trace(packed, tz=UTC)
        plain_read, plain = read_trace(DATA / name, tz=UTC)
        assert list(records) == list(plain)
        assert read.format == plain_read.format and read.bad_samples == plain_read.bad_samples


# (fixture, lengths replayed, bad lines): the public traces replay their lengths too
LENGTH_CASES = [
    ("mooncake.jsonl", [(6955, 52), (6472, 26), (512, 12), (1024, 300), (8000, 12)], []),
    ("azure.csv", [(374, 44), (396, 109), (879, 1), (100, 10), (2048, 256)], [6]),
    ("burstgpt.csv", [(472, 18), (417, 276), (300, 30), (3006, 118)], [3]),  # 3: failed, 0 out
]


@pytest.mark.parametrize(("name", "lengths", "bad_lines"), LENGTH_CASES)
def test_public_traces_are_length_logs_for_replay(
    name: str, lengths: list[tuple[int, int]], bad_lines: list[int]
) -> None:
    index = index_log(DATA / name)
    with open(index.path, "rb") as f:
        got = [read_entry(f, index, i) for i in range(index.valid)]
    assert [(e.kind, e.input_tokens, e.output_tokens) for e in got] == [
        ("lengths", n_in, n_out) for n_in, n_out in lengths
    ]
    assert [line for line, _ in index.bad_samples] == bad_lines
