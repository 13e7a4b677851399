"""Whether a stage has enough usable rows to be judged at all, and if not, why in words.

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
"""

from __future__ import annotations

import pandas as pd

from analysis import rules
from analysis.numeric import num

#: more than this share of a stage's rows excluded as length mismatches: too few left to judge
MAX_EXCLUDED_SHARE = 0.5

LENGTH_ADVICE = (
    "the server ignores the requested lengths (it stops at its own end-of-sequence or caps "
    "max_tokens, or counts the prompt differently): let it honour ignore_eos/min_tokens (vLLM, "
    "SGLang and llama.cpp do), raise its max_tokens / context cap, or replay a prompt log "
    "(--llm-prompt-log) where lengths are not pinned"
)


_CITE = rules.cite("insufficient_data")


def _count(row: pd.Series, column: str) -> int:
    value = num(row.get(column))
    return 0 if value is None else int(value)


def insufficient_reason(row: pd.Series) -> str | None:
    """Why the stage cannot be judged, or None when it can."""
    requests = _count(row, "requests")
    excluded = _count(row, "length_mismatch")
    ok, errors = _count(row, "ok"), _count(row, "errors")
    if requests == 0:
        return f"insufficient data: no requests were measured in this stage {_CITE}"
    if excluded > MAX_EXCLUDED_SHARE * requests:
        return (
            f"insufficient data: {excluded} of {requests} requests "
            f"({100.0 * excluded / requests:.0f} %) missed the requested token lengths and were "
            f"excluded; {LENGTH_ADVICE} {_CITE}"
        )
    if ok == 0 and errors == 0:
        return f"insufficient data: no request of this stage was usable {_CITE}"
    return None


def excluded_note(row: pd.Series) -> str | None:
    """A reason line for a judged stage that still excluded some rows (so it is never silent)."""
    requests, excluded = _count(row, "requests"), _count(row, "length_mismatch")
    if excluded == 0 or requests == 0:
        return None
    return (
        f"{excluded} of {requests} requests ({100.0 * excluded / requests:.0f} %) excluded: "
        "their token counts missed the requested lengths"
    )
