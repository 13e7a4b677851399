"""Append rows to one contract CSV file, flushed at least once a second, safe to close twice.

Why a class of our own rather than ``csv.DictWriter`` alone: the contract wants empty cells (not
``None``/``nan`` strings) for missing values, 1/0 for booleans, a header written once even when
the file is reopened for appending, and a time-based flush so that a run killed with SIGKILL
leaves files that parse (at most one second of rows lost, never a torn header).
"""

from __future__ import annotations

import csv
import math
import os
import time
from collections.abc import Iterable, Mapping
from typing import IO, Any

FLUSH_INTERVAL_S = 1.0


def format_cell(value: Any) -> str | int | float:
    """Render one value for the CSV: missing → empty, bool → 1/0, NaN → empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return 1 if value else 0
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return ""
        return value
    if isinstance(value, str):
        # one row per line: keep free text (error messages) on one line
        return value.replace("\r", " ").replace("\n", " ")
    return value  # type: ignore[no-any-return]


class CsvSink:
    """One CSV file with a fixed header; rows are mappings keyed by column name.

    Unknown keys are an error (a typo would otherwise silently drop data); missing keys are
    written as empty cells.
    """

    def __init__(
        self, path: str | os.PathLike[str], columns: Iterable[str], *, append: bool = False
    ) -> None:
        self.path = os.fspath(path)
        self.columns = tuple(columns)
        exists = append and os.path.exists(self.path) and os.path.getsize(self.path) > 0
        self._file: IO[str] | None = open(  # noqa: SIM115 - lifetime managed by close()
            self.path, "a" if exists else "w", newline="", encoding="utf-8"
        )
        self._writer = csv.writer(self._file)
        if not exists:
            self._writer.writerow(self.columns)
            self._file.flush()
        self._last_flush = time.monotonic()
        self.rows_written = 0

    @property
    def closed(self) -> bool:
        return self._file is None

    def write(self, row: Mapping[str, Any]) -> None:
        """Append one row; flushes if the last flush is a second old or more."""
        if self._file is None:
            raise ValueError(f"{self.path} is closed")
        unknown = set(row) - set(self.columns)
        if unknown:
            raise KeyError(f"{self.path}: unknown columns {sorted(unknown)}")
        self._writer.writerow([format_cell(row.get(c)) for c in self.columns])
        self.rows_written += 1
        self.maybe_flush()

    def write_many(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.write(row)

    def maybe_flush(self) -> None:
        if self._file is not None and time.monotonic() - self._last_flush >= FLUSH_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()
            self._last_flush = time.monotonic()

    def close(self) -> None:
        """Flush and close; calling it again does nothing."""
        if self._file is not None:
            self._file.flush()
            self._file.close()
            self._file = None
