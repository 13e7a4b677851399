"""Numbers that may be missing: one way to read a cell as float-or-None, one way to print it.

The printing half is the number format of the figures the terminal's screen and the record
table print (:mod:`analysis.report.screen`, :mod:`analysis.report.table`), so one quantity reads
the same in the table and in the lines above it:

* :func:`fmt_magnitude` — about three significant digits, no exponent (0.0123, 0.62, 9.05, 12.5,
  880, 12345); :func:`fmt_ms` the same in ms;
* :func:`fmt_pct` — at most one decimal, a trailing ".0" dropped (100, 97.3, 0.5);
  :func:`fmt_share` the same with " %";
* :func:`fmt_ratio` — two decimals and "×" (2.55×), the form of every "× the baseline";
* :func:`fmt_count` and :func:`counted` — whole counts (1,234; "16 users");
* :func:`fmt_users` — a concurrency in whole users, as the knee's fit says it (8, not 7.6).

The judgement's own sentences (a signal's text, a reason) still print with :func:`fmt` /
:func:`sig4` (four significant digits) and their own f-strings.

The record frame holds NaN where a stage has no data (never 0), numpy scalars where pandas made
them, and None in hand-typed tables. Every judgement module reads such a value as ``float | None``
and prints it as ``—`` (NA) when missing; they all use these helpers so that "missing" means one
thing across the knee, the baseline, the diagnosis, the recommendations and the comparisons.
Other tools' JSON exports (:mod:`analysis.importers`) are read with :func:`json_number`; a cell
that may hold text where a number belongs (a row's HTTP status, an llm-d report's field) with
:func:`lenient_num`.

pandas is imported on first use, so the stdlib-only importers can use this module without it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

#: how a missing number is printed
NA = "—"  # the one symbol for "not measured", everywhere


def is_missing(value: Any) -> bool:
    """True for None, NaN and pandas' missing markers: all mean "no data", shown as —."""
    if value is None:
        return True
    import pandas as pd  # here, not at the top: json_number's callers never load pandas

    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or an array: a value, not a missing marker
        return False


def num(value: Any) -> float | None:
    """``value`` as a float, or None when it is missing (None, NaN, pd.NA) rather than 0."""
    if isinstance(value, float):  # float and numpy's float64, the common case: no pd.isna
        return None if math.isnan(value) else float(value)
    if is_missing(value):
        return None
    number = float(value)
    return None if math.isnan(number) else number


def lenient_num(value: Any) -> float | None:
    """:func:`num`, with text or any other non-number read as None rather than raised: for the
    cells a reader does not control (the rows' error columns, another tool's report), where
    such a value means "no number here", as a missing one does."""
    try:
        return num(value)
    except (TypeError, ValueError):
        return None


def json_number(value: Any) -> float | None:
    """A JSON number (int or float, never a bool) as a float; None for anything else.

    For another tool's export, where a field may be absent, null, a string or a list: only a number
    is read as one (``"12"`` and ``true`` are not numbers there). A NaN the file holds stays NaN.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def cell(row: pd.Series | None, name: str) -> float | None:
    """The number in column ``name`` of ``row``; None when there is no row, column or value."""
    if row is None or name not in row.index:
        return None
    return num(row[name])


def sig4(value: float) -> str:
    """Four significant digits with thousands separators, never in exponent form: 17,770 not
    1.777e+04 (a 17.8 s tail in ms), 0.0123 as is."""
    if abs(value) >= 1e4:
        return f"{value:,.0f}"
    return f"{value:,.4g}"


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless one: "1 user", "16 users", "1 request"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def fmt(value: float | None, unit: str = "") -> str:
    """:func:`sig4` and ``unit``; ``—`` when missing."""
    if value is None or math.isnan(value):
        return NA
    return f"{sig4(value)}{unit}"


def scaled(value: Any, scale: float = 1.0) -> float | None:
    """``value`` × ``scale`` as a float; None when missing or not a number (a text cell: shown
    as —, not a crash)."""
    number = lenient_num(value)
    return None if number is None else number * scale


def fmt_magnitude(value: Any, scale: float = 1.0) -> str:
    """About three significant digits, no exponent: 0.0123, 0.62, 9.05, 12.5, 880, 12345."""
    number = scaled(value, scale)
    if number is None:
        return NA
    size = abs(number)
    if size >= 100 or number == 0:
        return f"{number:.0f}"
    if size >= 10:
        return f"{number:.1f}"
    if size >= 1:
        return f"{number:.2f}"
    if size >= 0.01:
        return f"{number:.3f}"
    return f"{number:.2g}"


def fmt_pct(value: Any) -> str:
    """A percentage with at most one decimal, trailing ".0" dropped: 100, 97.3, 0.5."""
    number = scaled(value)
    if number is None:
        return NA
    text = f"{number:.1f}"
    text = text[:-2] if text.endswith(".0") else text
    return "0" if text == "-0" else text


def fmt_int(value: Any) -> str:
    number = scaled(value)
    return NA if number is None else f"{number:.0f}"


def fmt_count(value: Any) -> str:
    """A whole count with thousands separators: 7, 1,234."""
    number = scaled(value)
    return NA if number is None else f"{number:,.0f}"


def fmt_ms(value: Any) -> str:
    """A duration in milliseconds: 682 ms, 17.5 ms."""
    text = fmt_magnitude(value)
    return text if text == NA else f"{text} ms"


def fmt_share(value: Any) -> str:
    """A percentage with its sign: 6 %, 15.2 %."""
    text = fmt_pct(value)
    return text if text == NA else f"{text} %"


def fmt_ratio(value: Any) -> str:
    """A ratio to a yardstick: 2.55×."""
    number = scaled(value)
    return NA if number is None else f"{number:.2f}×"


def fmt_users(value: Any) -> str:
    """A concurrency in whole users (nearest, at least 1)."""
    number = scaled(value)
    return NA if number is None else str(max(1, int(number + 0.5)))
