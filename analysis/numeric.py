"""Numbers that may be missing: one way to read a cell as float-or-None, one way to print it.

The record frame holds NaN where a stage has no data (never 0), numpy scalars where pandas made
them, and None in hand-typed tables. Every judgement module reads such a value as ``float | None``
and prints it as ``—`` (NA) when missing; they all use these helpers so that "missing" means one
thing across the knee, the baseline, the diagnosis, the recommendations and the comparisons.
Other tools' JSON exports (:mod:`analysis.importers`) are read with :func:`json_number`.

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
    if is_missing(value):
        return None
    number = float(value)
    return None if math.isnan(number) else number


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
