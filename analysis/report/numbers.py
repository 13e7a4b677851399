"""The one number format of every printed figure: counts, magnitudes, ms, %, ratios, users.

Every figure the terminal and the report print goes through these, so one quantity reads the
same everywhere ("7.83" in the table and in the sentence, never "7.833" beside "7.8"):

* :func:`fmt_magnitude` — about three significant digits, no exponent (0.0123, 0.62, 9.05, 12.5,
  880, 12345); :func:`fmt_ms` the same with its unit;
* :func:`fmt_pct` — at most one decimal, a trailing ".0" dropped (100, 97.3, 0.5);
  :func:`fmt_share` the same with " %";
* :func:`fmt_ratio` — two decimals and "×" (2.55×), the form of every "× the baseline";
* :func:`fmt_count` — a whole count with thousands separators (1,234);
* :func:`fmt_users` — a concurrency in whole users, as the knee's fit says it (8, not 7.6).

A missing value prints as ``—`` (:data:`analysis.numeric.NA`), never 0.
"""

from __future__ import annotations

from typing import Any

from analysis.numeric import NA, num


def scaled(value: Any, scale: float = 1.0) -> float | None:
    """``value`` × ``scale`` as a float; None when missing or not a number (a text cell)."""
    try:
        number = num(value)
    except (TypeError, ValueError):  # text in a numeric column: shown as —, not a crash
        return None
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
