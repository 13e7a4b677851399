"""CsvSink: contract formatting, unknown columns, double close, append with one header."""

from __future__ import annotations

import csv
import math

import pytest

from loadknee_locust.record.csvsink import CsvSink, format_cell


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, ""), (True, 1), (False, 0), (math.nan, ""), (1.5, 1.5), ("a\nb", "a b"), (3, 3)],
)
def test_format_cell(value: object, expected: object) -> None:
    assert format_cell(value) == expected


def test_rows_header_and_append(tmp_path) -> None:
    path = tmp_path / "x.csv"
    sink = CsvSink(path, ("a", "b"))
    sink.write({"a": 1})
    sink.close()
    sink.close()  # safe twice
    again = CsvSink(path, ("a", "b"), append=True)
    again.write({"a": 2, "b": None})
    with pytest.raises(KeyError):
        again.write({"c": 1})
    again.close()
    rows = list(csv.reader(path.open()))
    assert rows == [["a", "b"], ["1", ""], ["2", ""]]
