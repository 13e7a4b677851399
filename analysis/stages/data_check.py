"""Whether a stage has enough usable rows to be judged at all, and if not, why (as a fact).

Why: every signal compares numbers computed from a stage's ``ok`` rows; with none (an empty
``requests.csv``, a stage cut before any request finished) or with most rows left out because
their token counts missed the target (``length_mismatch``: the server ignores the requested
lengths), no signal can fire and the stage used to read "comfortable", with settings derived
from it. Such a stage gets the verdict ``insufficient_data`` instead, and nothing is recommended
from it.

Rules, for one summary row (measured window only):

* no rows at all → insufficient ("no requests were measured");
* more than :data:`MAX_EXCLUDED_SHARE` of the rows excluded as length mismatches → insufficient,
  naming the server as ignoring the requested lengths and what to change;
* no ``ok`` row and no error either → insufficient.

A stage whose rows all failed is *not* insufficient: the failures are the data (red line).
The answer is a :class:`RowsFact`; :mod:`analysis.report.knee_words` says it in words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pandas as pd

from loadknee_core.numeric import num

#: more than this share of a stage's rows excluded as length mismatches: too few left to judge
MAX_EXCLUDED_SHARE = 0.5


@dataclass(frozen=True)
class RowsFact:
    """How many of a stage's rows could be used: why it cannot be judged (``no_requests``,
    ``lengths_missed``: most rows missed the requested lengths, ``none_usable``), or the rows a
    judged stage left out (``some_excluded``)."""

    kind: Literal["no_requests", "lengths_missed", "none_usable", "some_excluded"]
    requests: int  # rows in the measured window
    excluded: int  # rows left out for missing the requested token lengths
    rule: str = "insufficient_data"


def _count(row: pd.Series, column: str) -> int:
    value = num(row.get(column))
    return 0 if value is None else int(value)


def insufficient_rows(row: pd.Series) -> RowsFact | None:
    """Why the stage cannot be judged, or None when it can."""
    requests = _count(row, "requests")
    excluded = _count(row, "length_mismatch")
    ok, errors = _count(row, "ok"), _count(row, "errors")
    if requests == 0:
        return RowsFact("no_requests", requests, excluded)
    if excluded > MAX_EXCLUDED_SHARE * requests:
        return RowsFact("lengths_missed", requests, excluded)
    if ok == 0 and errors == 0:
        return RowsFact("none_usable", requests, excluded)
    return None


def excluded_rows(row: pd.Series) -> RowsFact | None:
    """The rows a judged stage still excluded (a reason line, so it is never silent)."""
    requests, excluded = _count(row, "requests"), _count(row, "length_mismatch")
    if excluded == 0 or requests == 0:
        return None
    return RowsFact("some_excluded", requests, excluded)
