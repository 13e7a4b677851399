"""Read when each logged request started (and ended) and its lengths, from a log or a public trace.

One streaming pass (a ``.gz`` file is read as it is decompressed), one :class:`TraceRecord` (a
small tuple) per usable line, in file order; no text is kept (a prompt's text is never read into
a record). The formats (``fmt``; ``auto`` tells them by the file's first record or header):

* ``log``: the prompt logs ``--llm-prompt-log`` reads (JSON Lines, or CSV with a header) with a
  time field: the first present of :data:`START_FIELDS` is the start; the end from
  :data:`END_FIELDS`, or a duration from :data:`DURATION_FIELDS` (seconds) or
  :data:`DURATION_MS_FIELDS`; lengths from ``input_tokens`` / ``output_tokens`` (or
  ``prompt_tokens`` / ``completion_tokens``, also inside ``usage``). Times are unix s/ms/µs/ns or
  ISO 8601 with or without a zone (:mod:`~loadknee_core.tracetime`).
* ``mooncake``: Mooncake's JSON Lines, ``{"timestamp": ms, "input_length": N, "output_length":
  M, "hash_ids": [...]}`` (``timestamp`` in milliseconds from the trace's start).
* ``azure``: the Azure LLM inference trace CSV, ``TIMESTAMP,ContextTokens,GeneratedTokens``
  (``TIMESTAMP`` a date-time without a zone, read in ``tz``).
* ``burstgpt``: BurstGPT's CSV, ``Timestamp,Model,Request tokens,Response tokens,Total
  tokens,Log Type`` (``Timestamp`` seconds from the trace's start; a request whose ``Response
  tokens`` is 0 failed: its arrival counts, its output length is unknown).

A line that cannot be read is named (line number and reason, never its content) in the
:class:`TraceRead` the reader fills as it goes; the rest of the file is still read. A line whose
time is unreadable is left out; one whose length or end is unreadable keeps its start.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import IO, Any, Literal, NamedTuple, get_args

from loadknee_core.logindex import RecordTally, bad_lines_text, csv_rows
from loadknee_core.tracetime import TimeUnit, duration_seconds, time_seconds

TraceFormat = Literal["auto", "log", "mooncake", "azure", "burstgpt"]
TRACE_FORMATS: tuple[str, ...] = get_args(TraceFormat)

START_FIELDS = (
    "timestamp", "start_time", "start_unix_s", "start", "arrival_time", "request_time", "time",
    "created", "created_at",
)  # fmt: skip
END_FIELDS = ("end_time", "end_unix_s", "end", "finish_time", "completed_at")
DURATION_FIELDS = ("duration_s", "latency_s", "e2e_s", "duration", "latency")
DURATION_MS_FIELDS = ("duration_ms", "latency_ms", "e2e_ms")
INPUT_FIELDS = ("input_tokens", "prompt_tokens", "input_length")
OUTPUT_FIELDS = ("output_tokens", "completion_tokens", "output_length")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")


class TraceRecord(NamedTuple):
    """One logged request: its start, how long it took (None: not logged) and its lengths."""

    line: int
    start_s: float  # unix seconds, or seconds from the trace's start for relative traces
    duration_s: float | None
    input_tokens: int | None
    output_tokens: int | None


@dataclass
class TraceRead(RecordTally):
    """What the reader saw; filled while the records are read."""

    path: str
    format: str = ""
    records: int = 0  # non-blank lines or rows seen
    used: int = 0  # records yielded
    bad_count: int = 0
    bad_samples: list[tuple[int, str]] = field(default_factory=list)
    failed: int = 0  # BurstGPT rows with 0 response tokens (failed requests)

    def summary(self) -> str:
        """One line: counts and the first bad lines with their reasons."""
        text = f"{os.path.basename(self.path)} ({self.format}): {self.used} of {self.records} used"
        return text + bad_lines_text(self.bad_count, self.bad_samples, "with problems")


def _count(value: Any) -> int | None:
    """A token count from JSON or CSV; empty → None; raises ValueError when not a count."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError("a length is not a number") from None
    if number != int(number) or number < 0 or isinstance(value, bool):
        raise ValueError("a length is not a whole number >= 0")
    return int(number)


def _first(obj: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        value = obj.get(name)
        if value is not None and value != "":
            return value
    return None


@dataclass(frozen=True)
class _Reading:
    unit: TimeUnit
    tz: tzinfo | None
    start: tuple[str, ...] = START_FIELDS
    end: tuple[str, ...] = END_FIELDS
    duration: tuple[str, ...] = DURATION_FIELDS
    duration_ms: tuple[str, ...] = DURATION_MS_FIELDS
    input: tuple[str, ...] = INPUT_FIELDS
    output: tuple[str, ...] = OUTPUT_FIELDS

    def narrowed(self, header: list[str]) -> _Reading:
        """Only the field names a CSV header has: fewer look-ups per row."""

        def keep(names: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(n for n in names if n in header)

        return _Reading(
            self.unit, self.tz, keep(self.start), keep(self.end), keep(self.duration),
            keep(self.duration_ms), keep(self.input), keep(self.output),
        )  # fmt: skip

    def columns(self) -> tuple[str, ...]:
        return (*self.start, *self.end, *self.duration, *self.duration_ms, *self.input,
                *self.output)  # fmt: skip


def _log_record(obj: Any, line: int, opts: _Reading, read: TraceRead) -> TraceRecord | None:
    """One prompt-log record with a time; None (and the line named) when its time is unusable."""
    if not isinstance(obj, Mapping):
        read.bad(line, "not a JSON object")
        return None
    body = obj.get("body")
    usage = obj.get("usage")
    if isinstance(body, Mapping) and _first(obj, opts.start) is None:
        obj = {**body, **obj}
    raw_start = _first(obj, opts.start)
    if raw_start is None:
        read.bad(line, "no time field (" + ", ".join(START_FIELDS[:4]) + ", …)")
        return None
    try:
        start = time_seconds(raw_start, unit=opts.unit, tz=opts.tz)
    except ValueError as exc:
        read.bad(line, str(exc))
        return None
    duration = None
    try:
        if (raw_end := _first(obj, opts.end)) is not None:
            duration = time_seconds(raw_end, unit=opts.unit, tz=opts.tz) - start
            if duration < 0:
                duration = None
                raise ValueError("its end is before its start")
        elif (raw := _first(obj, opts.duration)) is not None:
            duration = duration_seconds(raw)
        elif (raw := _first(obj, opts.duration_ms)) is not None:
            duration = duration_seconds(raw, 1e-3)
    except ValueError as exc:
        read.bad(line, f"{exc}: its start is kept")
    lengths = {**usage, **obj} if isinstance(usage, Mapping) else obj
    try:
        n_in = _count(_first(lengths, opts.input))
        n_out = _count(_first(lengths, opts.output))
    except ValueError as exc:
        read.bad(line, f"{exc}: its start is kept")
        n_in = n_out = None
    return TraceRecord(line, start, duration, n_in, n_out)


def _mooncake_record(obj: Any, line: int, opts: _Reading, read: TraceRead) -> TraceRecord | None:
    if not isinstance(obj, Mapping):
        read.bad(line, "not a JSON object")
        return None
    try:
        start = time_seconds(obj.get("timestamp"), unit="ms")
    except ValueError as exc:
        read.bad(line, f"timestamp: {exc}")
        return None
    try:
        n_in, n_out = _count(obj.get("input_length")), _count(obj.get("output_length"))
    except ValueError as exc:
        read.bad(line, f"{exc}: its start is kept")
        n_in = n_out = None
    return TraceRecord(line, start, None, n_in, n_out)


_JsonRow = Callable[[Any, int, _Reading, TraceRead], TraceRecord | None]


def _jsonl(f: IO[str], row: _JsonRow, opts: _Reading, read: TraceRead) -> Iterator[TraceRecord]:
    for line_no, raw in enumerate(f, 1):
        if not raw.strip():
            continue
        read.records += 1
        if line_no == 1:
            raw = raw.lstrip("\ufeff")  # a byte-order mark some editors write
        try:
            obj = json.loads(raw)
        except ValueError:
            read.bad(line_no, "not valid JSON")
            continue
        record = row(obj, line_no, opts, read)
        if record is not None:
            read.used += 1
            yield record


def _csv(
    f: IO[str], fmt: str, header: list[str], opts: _Reading, read: TraceRead
) -> Iterator[TraceRecord]:
    reader = csv.reader(f)
    if fmt == "log":
        opts = opts.narrowed(header)
        wanted = [(name, header.index(name)) for name in opts.columns()]  # never the prompt
        for _, line, row in csv_rows(reader, read, lines_before=1):
            if len(row) != len(header):
                read.bad(line, f"{len(row)} fields where the header has {len(header)}")
                continue
            record = _log_record({name: row[i] for name, i in wanted}, line, opts, read)
            if record is not None:
                read.used += 1
                yield record
        return
    names = AZURE_COLUMNS if fmt == "azure" else BURSTGPT_COLUMNS
    i_t, i_in, i_out = (header.index(name) for name in names)
    unit: TimeUnit = opts.unit if fmt == "azure" else "s"
    width = max(i_t, i_in, i_out) + 1
    for _, line, row in csv_rows(reader, read, lines_before=1):
        if len(row) < width:
            read.bad(line, f"{len(row)} fields where the header has {len(header)}")
            continue
        try:
            start = time_seconds(row[i_t], unit=unit, tz=opts.tz)
        except ValueError as exc:
            read.bad(line, f"{names[0]}: {exc}")
            continue
        try:
            n_in, n_out = _count(row[i_in]), _count(row[i_out])
        except ValueError as exc:
            read.bad(line, f"{exc}: its start is kept")
            n_in = n_out = None
        if fmt == "burstgpt" and n_out == 0:
            read.failed += 1
            n_out = None
        read.used += 1
        yield TraceRecord(line, start, None, n_in, n_out)


def _csv_format(header: list[str]) -> str:
    if all(name in header for name in AZURE_COLUMNS):
        return "azure"
    if all(name in header for name in BURSTGPT_COLUMNS):
        return "burstgpt"
    return "log"


def _jsonl_format(f: IO[str]) -> str:
    for raw in f:
        if raw.strip():
            try:
                obj = json.loads(raw.lstrip("\ufeff"))
            except ValueError:
                return "log"
            is_mooncake = isinstance(obj, dict) and "input_length" in obj and "timestamp" in obj
            return "mooncake" if is_mooncake else "log"
    return "log"


def is_csv(path: str) -> bool:
    name = path.lower()
    return name.removesuffix(".gz").endswith(".csv")


def _open(path: str) -> IO[str]:
    if path.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", errors="replace", newline="")
    return open(path, encoding="utf-8", errors="replace", newline="")


def read_trace(
    path: str | os.PathLike[str],
    fmt: TraceFormat = "auto",
    *,
    unit: TimeUnit = "auto",
    tz: tzinfo | None = None,
) -> tuple[TraceRead, Iterator[TraceRecord]]:
    """The reader's report (filled as records are taken) and the records, in file order.

    Raises ``OSError`` when the file cannot be opened and ``ValueError`` when its header does not
    fit ``fmt``; everything wrong inside the file is named in the report instead.
    """
    path = os.fspath(path)
    read = TraceRead(path=path)
    opts = _Reading(unit, tz)
    f = _open(path)  # closed when the records are exhausted, or below
    try:
        if is_csv(path):
            first = next(csv.reader([f.readline()]), [])
            header = [h.strip().lstrip("\ufeff") for h in first]
            found = _csv_format(header)
        else:
            found = _jsonl_format(f)
            f.seek(0)
            header = []
        wanted = {"azure": AZURE_COLUMNS, "burstgpt": BURSTGPT_COLUMNS}.get(fmt)
        if wanted is not None and found != fmt:
            raise ValueError(f"{path}: a {fmt} trace needs the columns {', '.join(wanted)}")
        if fmt == "mooncake" and is_csv(path):
            raise ValueError(f"{path}: a mooncake trace is JSON Lines, not CSV")
        if found == "log" and is_csv(path) and not any(n in header for n in START_FIELDS):
            names = ", ".join(START_FIELDS)
            raise ValueError(f"{path}: no time column in its header (one of {names})")
        read.format = found if fmt == "auto" else fmt
    except BaseException:
        f.close()
        raise

    def records() -> Iterator[TraceRecord]:
        with f:
            if is_csv(path):
                yield from _csv(f, read.format, header, opts, read)
            else:
                row = _mooncake_record if read.format == "mooncake" else _log_record
                yield from _jsonl(f, row, opts, read)

    return read, records()
