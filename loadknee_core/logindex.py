"""Index a prompt log in one streaming pass: byte offsets of valid records, bad lines, sha256.

Why an index rather than loading the log: production logs are large (100k+ records, long
prompts). One pass reads the file line by line, hashes every byte (sha256 for run.json),
validates each record and keeps only its byte offset (8 bytes in an ``array``); records are read
back by seeking when sampled. Memory is flat in the size of the prompts.

JSON Lines (``.jsonl``, ``.json``, anything not ``.csv``): one record per line, blank lines
skipped. CSV (``.csv``): a header row naming the columns (``prompt``/``text``, ``max_tokens``,
``output_tokens``, ``input_tokens``), records may span lines (quoted newlines).
Bad records are counted; the first :data:`MAX_BAD_SAMPLES` are kept as ``(line number,
reason)``; the reason never quotes the record.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from loadknee_core.logentry import LogEntry, LogFormat, entry_from_mapping

MAX_BAD_SAMPLES = 20
SNIFF_BYTES = 65536  # enough to see NUL bytes or the line endings of a header and a few rows


class RecordTally:
    """What a log reader counts: every record it saw, and the bad ones (all counted, the first
    :data:`MAX_BAD_SAMPLES` kept as ``(line number, reason)``). The prompt-log index and the
    trace reader keep the same tally; this is its one rule. Subclasses are dataclasses that
    declare these three fields."""

    records: int
    bad_count: int
    bad_samples: list[tuple[int, str]]

    def bad(self, line_no: int, reason: str) -> None:
        self.bad_count += 1
        if len(self.bad_samples) < MAX_BAD_SAMPLES:
            self.bad_samples.append((line_no, reason))


@dataclass
class LogIndex(RecordTally):
    """Where the valid records are, and what was wrong with the others."""

    path: str
    is_csv: bool
    sha256: str = ""
    records: int = 0  # records seen (valid + bad)
    offsets: array[int] = field(default_factory=lambda: array("q"))
    bad_count: int = 0
    bad_samples: list[tuple[int, str]] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def valid(self) -> int:
        return len(self.offsets)

    def _ok(self, offset: int, entry: LogEntry) -> None:
        self.offsets.append(offset)
        self.kinds[entry.kind] = self.kinds.get(entry.kind, 0) + 1

    def summary(self) -> str:
        """One line for the log: counts and the first bad line numbers with reasons."""
        text = f"{self.path}: {self.valid} valid of {self.records} records"
        return text + bad_lines_text(self.bad_count, self.bad_samples, "malformed")


def bad_lines_text(bad_count: int, samples: list[tuple[int, str]], word: str) -> str:
    """``", 3 malformed (line 4: …; line 9: …)"``: the count and the first five bad lines with
    their reasons (never their content), or "" when none was bad."""
    if not bad_count:
        return ""
    shown = "; ".join(f"line {n}: {r}" for n, r in samples[:5])
    more = "" if bad_count <= 5 else f"; … {bad_count - 5} more"
    return f", {bad_count} {word} ({shown}{more})"


def _lines(f: IO[bytes], digest: Any) -> Iterator[str]:
    while raw := f.readline():
        if digest is not None:
            digest.update(raw)
        yield raw.decode("utf-8", "replace")


def _csv_record(header: list[str], row: list[str]) -> dict[str, str]:
    if len(row) != len(header):
        raise ValueError(f"{len(row)} fields where the header has {len(header)}")
    return dict(zip(header, row, strict=True))


def index_log(path: str | os.PathLike[str], fmt: LogFormat = "auto") -> LogIndex:
    """One pass over the file; raises ``ValueError`` when no valid record remains, or when the
    file cannot be a CSV at all (binary content, CR-only line endings, an unreadable header)."""
    path = os.fspath(path)
    index = LogIndex(path=path, is_csv=path.lower().endswith(".csv"))
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        if index.is_csv:
            _index_csv(f, index, fmt, digest)
        else:
            _index_jsonl(f, index, fmt, digest)
    index.sha256 = digest.hexdigest()
    if not index.valid:
        detail = f" ({index.summary()})" if index.records else ""
        raise ValueError(f"prompt log {path} has no valid record{detail}")
    return index


def _index_jsonl(f: IO[bytes], index: LogIndex, fmt: LogFormat, digest: Any) -> None:
    line_no = 0
    offset = 0
    while raw := f.readline():
        line_no += 1
        digest.update(raw)
        start, offset = offset, offset + len(raw)
        if not raw.strip():
            continue
        index.records += 1
        try:
            entry = entry_from_mapping(json.loads(raw), fmt)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            reason = (
                "not valid JSON"
                if not str(exc) or isinstance(exc, json.JSONDecodeError)
                else str(exc)
            )
            index.bad(line_no, reason)
            continue
        index._ok(start, entry)


def _index_csv(f: IO[bytes], index: LogIndex, fmt: LogFormat, digest: Any) -> None:
    head = f.read(SNIFF_BYTES)
    f.seek(0)
    if problem := _head_problem(index.path, head, is_csv=True):
        raise ValueError(problem)
    reader = csv.reader(_lines(f, digest))
    try:
        index.header = [h.strip().lstrip("\ufeff") for h in next(reader)]
    except StopIteration:
        return
    except csv.Error as exc:
        raise ValueError(
            f"prompt log {index.path}: its CSV header cannot be read ({exc})"
        ) from None
    # csv.reader pulls lines lazily: f.tell() before a row is read is that record's first byte
    for start, line_no, row in csv_rows(reader, index, offset=f.tell, blank_spaces=True):
        try:
            entry = entry_from_mapping(_csv_record(index.header, row), fmt)
        except ValueError as exc:
            index.bad(line_no, str(exc))
            continue
        index._ok(start, entry)


def csv_rows(
    reader: Any,
    tally: RecordTally,
    *,
    lines_before: int = 0,
    offset: Callable[[], int] = lambda: 0,
    blank_spaces: bool = False,
) -> Iterator[tuple[int, int, list[str]]]:
    """(``offset()`` before the row, first line number, cells) of each non-blank row of
    ``reader``, each counted in ``tally``; a row csv cannot parse is counted bad as ``CSV: …``
    at its line, never raised, so one broken quote costs one record, not the log.

    The prompt-log index and the trace reader both read CSV records this way; one loop keeps
    their counts and line numbers alike. ``lines_before``: lines read before ``reader`` started
    (a header read by another reader). ``blank_spaces``: a row of only whitespace is blank too
    (the prompt log's rule; a trace counts such a row and finds it short).
    """
    while True:
        start = offset()
        line_no = lines_before + reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            tally.records += 1
            tally.bad(line_no, f"CSV: {exc}")
            continue
        if not any(cell.strip() if blank_spaces else cell for cell in row):
            continue
        tally.records += 1
        yield start, line_no, row


def _head_problem(path: str, head: bytes, *, is_csv: bool) -> str | None:
    if b"\0" in head:
        return f"prompt log {path} is not text (it holds NUL bytes)"
    if is_csv and b"\r" in head and b"\n" not in head:
        return (
            f"prompt log {path} uses old Mac line endings (CR only); convert it to LF or CRLF "
            "line endings (e.g. tr '\\r' '\\n')"
        )
    return None


def sniff_problem(path: str | os.PathLike[str]) -> str | None:
    """A quick look at the first bytes, before any load: a file that cannot be a prompt log
    (missing, unreadable, binary, CR-only CSV) in words; None when it may be one."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError as exc:
        return f"prompt log {path} cannot be read: {exc.strerror or exc}"
    return _head_problem(path, head, is_csv=path.lower().endswith(".csv"))


def read_entry(f: IO[bytes], index: LogIndex, i: int, fmt: LogFormat = "auto") -> LogEntry:
    """Read back the ``i``-th valid record from an open binary file."""
    f.seek(index.offsets[i])
    if index.is_csv:
        row = next(csv.reader(_lines(f, None)))
        return entry_from_mapping(_csv_record(index.header, row), fmt)
    return entry_from_mapping(json.loads(f.readline()), fmt)
