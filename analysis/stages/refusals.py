"""Count each stage's refusals: failures the server turned away at once (its admission limit).

Why: a server that refuses instead of queueing (TGI ``--max-concurrent-requests``, a gateway's
in-flight limit) shows its capacity as fast HTTP 429/503 failures that start at one level; the
knee reads such a stage as past the capacity, not as a breakdown. The rule is the sweep's own
(:mod:`loadknee_core.refusals`, stdlib-only), applied here to the measured rows: each
failure is compared with its stage's median served e2e.

:func:`stage_refusals` returns, per stage with at least one refusal, the count, the commonest
HTTP status and message among them (the words the screen shows).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import pandas as pd

from loadknee_core.numeric import lenient_num
from loadknee_core.refusals import Failure, is_refusal


@dataclass(frozen=True)
class StageRefusals:
    """One stage's refusals: how many, and the commonest status and message among them."""

    refused: int
    http_status: int | None
    message: str


def _text(value: object) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def stage_refusals(measured: pd.DataFrame) -> dict[int, StageRefusals]:
    """Per stage, its refusals among the measured rows (``cls`` column: ``error`` rows)."""
    errors = measured[measured["cls"] == "error"]
    if errors.empty:
        return {}
    served = (measured["cls"] == "ok").to_numpy()  # one column's rows, not every column's
    served_p50 = measured["e2e_ms"][served].groupby(measured["stage"][served]).median()
    nothing = pd.Series(None, index=errors.index, dtype=object)
    statuses = errors.get("http_status", nothing)
    messages = errors.get("error", nothing)
    found: dict[int, list[tuple[int | None, str]]] = {}
    for stage, outcome, e2e, raw_status, raw_message in zip(
        errors["stage"], errors["outcome"], errors["e2e_ms"], statuses, messages, strict=True
    ):
        status = lenient_num(raw_status)
        code = None if status is None else int(status)
        message = _text(raw_message)
        failure = Failure(str(outcome), code, message, lenient_num(e2e))
        if is_refusal(failure, lenient_num(served_p50.get(stage))):
            found.setdefault(int(stage), []).append((code, message))
    out: dict[int, StageRefusals] = {}
    for stage, seen in found.items():
        (code, message), _ = Counter(seen).most_common(1)[0]
        out[stage] = StageRefusals(len(seen), code, message)
    return out
