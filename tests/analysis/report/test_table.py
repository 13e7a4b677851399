"""Record table: number formats, n/a for missing, verdict labels, width fitting, markdown, CSV."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pandas as pd
import pytest

from analysis.model import VERDICT_LABELS
from analysis.report.stage_reasons import reasons_text
from analysis.report.table import (
    RECORD_COLUMNS,
    UNTRUSTED_NOTE,
    fmt_magnitude,
    fmt_pct,
    format_csv,
    format_markdown,
    format_text,
    record_columns,
    record_frame,
)
from loadknee_core.numeric import NA
from tests.support.report_fixtures import seed002_knee, seed002_summary


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, NA),
        (math.nan, NA),
        (pd.NA, NA),
        (np.float64("nan"), NA),
        (0.0, "0"),
        (0.0123, "0.012"),
        (0.6, "0.600"),
        (9.051, "9.05"),
        (12.54, "12.5"),
        (880.4, "880"),
        (-3.0, "-3.00"),
    ],
)
def test_fmt_magnitude(value: object, expected: str) -> None:
    assert fmt_magnitude(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [(100.0, "100"), (97.34, "97.3"), (0.0, "0"), (math.nan, NA)]
)
def test_fmt_pct(value: object, expected: str) -> None:
    assert fmt_pct(value) == expected


def test_record_frame_joins_verdicts_and_marks_baseline() -> None:
    frame = record_frame(seed002_summary(), seed002_knee())
    knee = seed002_knee()
    judged = ["comfortable", "comfortable", "critical", "knee", "red_line"]
    assert [v.verdict for v in knee.stages] == judged
    assert list(frame["verdict"]) == ["baseline", *(VERDICT_LABELS[v] for v in judged)]
    assert frame.loc[4, "reasons"] == "; ".join(reasons_text(knee.stages[3]))
    assert frame.loc[5, "bottleneck"] == "memory"


def test_record_frame_without_knee_has_no_verdicts() -> None:
    frame = record_frame(seed002_summary(), None)
    assert frame["verdict"].tolist()[1:] == [None] * 5


def test_text_table_seed002_values_and_na() -> None:
    text = format_text(record_frame(seed002_summary(), seed002_knee()), width=200)
    lines = text.splitlines()
    header = lines[0].split()
    assert header[:5] == ["users", "reqs", "secs", "QPS", "P50"]  # sample size after users
    row48 = next(line for line in lines if line.split()[0] == "48")
    assert NA in row48  # P99 "OOM" and the missing tok/s are n/a, not 0
    assert VERDICT_LABELS["red_line"] in row48
    row24 = next(line for line in lines if line.split()[0] == "24")
    assert "1.80" in row24 and "2.80" in row24 and "880" in row24 and "critical" in row24
    assert " 0 " not in row48


@pytest.mark.parametrize("width", [60, 90, 120, 160])
def test_text_table_fits_width_and_names_dropped_columns(width: int) -> None:
    frame = record_frame(seed002_summary(), seed002_knee())
    text = format_text(frame, width=width)
    table_lines = [line for line in text.splitlines() if not line.startswith("(")]
    must = [c.header for c in RECORD_COLUMNS if c.priority == 0]
    for header in must:
        assert header in table_lines[0]
    widest_possible = len(format_text(frame, width=10_000).splitlines()[0])
    notes = [line for line in text.splitlines() if line.startswith("(")]
    if width >= widest_possible:
        assert notes == []
    else:  # one note naming every column the header left out
        (note,) = notes
        left_out = [c.header for c in record_columns(frame) if c.header not in table_lines[0]]
        assert left_out and all(header in note for header in left_out)
        if width >= 90:  # wide enough for the record table's columns: must really fit
            assert max(len(line) for line in table_lines) <= width


def test_untrusted_stage_gets_a_star_and_a_note() -> None:
    frame = record_frame(seed002_summary(), seed002_knee(untrusted_stage=2))
    assert frame.loc[2, "verdict"] == "comfortable*"
    assert UNTRUSTED_NOTE in format_text(frame)
    assert UNTRUSTED_NOTE in format_markdown(frame)


def test_markdown_has_every_column_and_the_reasons_listed_under_it() -> None:
    frame = record_frame(seed002_summary(), seed002_knee())
    md = format_markdown(frame)
    table, _, notes = md.strip().partition("\n\n")
    lines = table.splitlines()
    assert lines[0].startswith("| users |") and lines[0].endswith("| why |")
    assert lines[1].startswith("|---:|")
    assert len(lines) == 2 + 6
    cells_per_line = {line.replace("\\|", "").count("|") for line in lines}
    assert cells_per_line == {len(RECORD_COLUMNS) + 2}
    # the why column holds a key, each key a numbered item under the table with its reasons
    keys = [line.rstrip(" |").rsplit("| ", 1)[1] for line in lines[2:]]
    items = [line for line in notes.splitlines() if line[:1].isdigit()]
    numbered = [k for k in keys if k != "-"]
    assert numbered == [str(i) for i in range(1, len(items) + 1)] and items
    with_reasons = [r for r in frame["reasons"] if isinstance(r, str) and r]
    for key, item, reasons in zip(numbered, items, with_reasons, strict=True):
        assert item.startswith(f"{key}. ") and item.endswith(reasons.replace("|", "\\|"))
    assert max(len(line) for line in lines) < 400  # no column of sentences
    assert any("|" in r for r in with_reasons)  # a reason with a pipe, escaped just above


def test_csv_round_trips_numbers_and_empties() -> None:
    frame = record_frame(seed002_summary(), seed002_knee())
    rows = list(csv.DictReader(io.StringIO(format_csv(frame))))
    assert len(rows) == 6
    assert rows[5]["e2e_p99_ms"] == ""  # OOM: missing, never 0
    assert float(rows[3]["output_tok_s"]) == 880.0
    assert rows[4]["verdict"] == "knee"
    assert rows[4]["trusted"] == "1"
    back = pd.read_csv(io.StringIO(format_csv(frame)))
    assert math.isnan(back.loc[5, "output_tok_s"])


@pytest.mark.parametrize(
    ("value", "expected"),
    [(17770.4, "17,770"), (5003.2, "5,003"), (123456.0, "123,456"), (0.0123, "0.0123"),
     (12.345, "12.35"), (-25000.0, "-25,000"), (math.nan, NA), (None, NA)],
)  # fmt: skip
def test_fmt_never_writes_an_exponent(value: object, expected: str) -> None:
    from loadknee_core.numeric import fmt

    assert fmt(value) == expected  # type: ignore[arg-type]
