"""Read one logged time (a number or an ISO 8601 text) as seconds, for the trace readers.

* **Numbers** (JSON numbers or CSV cells): seconds unless ``unit`` says otherwise. With no unit
  given, a number that is an epoch time in milliseconds, microseconds or nanoseconds is told by
  its size (an epoch in seconds stays below ``1e11`` until the year 5138): ``>= 1e17`` ns,
  ``>= 1e14`` µs, ``>= 1e11`` ms. Small numbers are relative seconds (a trace starting at 0).
* **ISO 8601 texts** (``2024-05-10T00:00:00Z``, ``2023-11-16 18:15:46.6805900``, with or without
  a zone, with any number of fractional digits): a text with a zone is exact; a text without one
  is read in ``tz``, as the nvidia-smi merge reads its capture (``None``: this machine's zone).

Errors are ``ValueError`` with a short reason that never quotes the value (it may be anything).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, tzinfo
from typing import Any, Literal

TimeUnit = Literal["auto", "s", "ms", "us", "ns"]

UNIT_SECONDS: dict[str, float] = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}

# more than 6 fractional digits (Azure's 100 ns ticks): datetime keeps microseconds
_LONG_FRACTION = re.compile(r"(\.\d{6})\d+")


def number_seconds(value: float, unit: TimeUnit = "auto") -> float:
    """A numeric time in seconds (see the module docstring for ``auto``)."""
    if not math.isfinite(value):
        raise ValueError("time is not a finite number")
    if unit != "auto":
        return value * UNIT_SECONDS[unit]
    size = abs(value)
    if size >= 1e17:
        return value * 1e-9
    if size >= 1e14:
        return value * 1e-6
    if size >= 1e11:
        return value * 1e-3
    return value


def iso_seconds(text: str, tz: tzinfo | None = None) -> float:
    """Unix seconds of an ISO 8601 date-time; a naive one is read in ``tz`` (None: local)."""
    text = text.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    if len(text) == 27 and text[19] == "." and text[20:].isdigit():  # Azure: 7 digits, no zone
        text = text[:26]
    elif len(text) > 26:  # room for more than 6 fractional digits
        text = _LONG_FRACTION.sub(r"\1", text, count=1)
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError("time is neither a number nor an ISO 8601 date-time") from None
    if stamp.tzinfo is None and tz is not None:
        stamp = stamp.replace(tzinfo=tz)
    return stamp.timestamp()  # a naive datetime's timestamp() reads it in this machine's zone


def time_seconds(value: Any, *, unit: TimeUnit = "auto", tz: tzinfo | None = None) -> float:
    """Seconds of one logged time: a number, a numeric string or an ISO 8601 string."""
    if isinstance(value, bool) or value is None:
        raise ValueError("time is missing or not a number")
    if isinstance(value, int | float):
        return number_seconds(float(value), unit)
    if not isinstance(value, str) or not value.strip():
        raise ValueError("time is missing or not a number")
    try:
        number = float(value)
    except ValueError:
        return iso_seconds(value, tz)
    return number_seconds(number, unit)


def duration_seconds(value: Any, scale: float = 1.0) -> float:
    """A logged duration (a number or numeric string) × ``scale`` in seconds; must be >= 0."""
    if isinstance(value, bool) or value is None:
        raise ValueError("duration is missing or not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError("duration is not a number") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError("duration is negative or not finite")
    return number * scale
