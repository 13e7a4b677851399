"""Name each stage's failures: the share per outcome and HTTP status, and the commonest messages.

Why: "success 78.1 % (150 of 685 failed)" says that something failed, not what; a rejection
storm (HTTP 429/503), a server bug (500, resets, cut streams, error objects) and a stall
(timeouts) call for different fixes, and only the kind tells the bottleneck apart from queueing.

:func:`failure_mixes` reads the measured rows (``measured_requests``: a ``cls`` column) and
returns, per stage with at least one failure, a :class:`FailureMix`: counts by kind (a
:class:`FailureKind`: the recorded outcome and HTTP status), most first, the top
:data:`TOP_MESSAGES` error messages, and three families used by the diagnosis: **overload**
(HTTP 429 / 503: the server turned requests away), **stalls** (timeouts) and **server errors**
(everything else). :func:`name_failures` puts the mix into each verdict (its ``failures`` field
and a reason); :mod:`analysis.report.diagnosis_words` words it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

import pandas as pd

from analysis.diagnosis.facts import FailureFamily, FailureKind, FailureMix
from analysis.model import KneeResult

TOP_MESSAGES = 3
OVERLOAD_STATUSES = frozenset({429, 503})


def _status(status: object) -> int | None:
    try:
        code = float(str(status))
    except ValueError:
        return None
    return int(code) if code == code else None  # NaN: no status


def _kind(outcome: str, status: object) -> FailureKind:
    return FailureKind(outcome, _status(status) if outcome == "http_error" else None)


def _family(outcome: str, status: object) -> FailureFamily:
    if outcome == "timeout":
        return "stalls"
    if outcome == "http_error" and _status(status) in OVERLOAD_STATUSES:
        return "overload"
    return "server_errors"


def _short(message: object) -> str:
    text = (
        ""
        if message is None or (isinstance(message, float) and message != message)
        else str(message)
    )
    text = " ".join(text.split())
    return text[:77] + "..." if len(text) > 80 else text


def _most_first(pair: tuple[FailureKind, int]) -> tuple[int, str, int]:
    kind, count = pair
    return -count, kind.outcome, -1 if kind.http_status is None else kind.http_status


def failure_mixes(measured: pd.DataFrame) -> dict[int, FailureMix]:
    """Per stage with failures, its :class:`FailureMix` (rows need ``stage``, ``outcome``,
    ``http_status``, ``error`` and the ``cls`` column of :func:`measured_requests`)."""
    out: dict[int, FailureMix] = {}
    if measured.empty:
        return out
    # the failed rows cut out once, then grouped: not every stage's rows copied to find them
    sizes = measured.groupby("stage").size()
    for stage, failed in measured[measured["cls"] == "error"].groupby("stage"):
        pairs = list(zip(failed["outcome"].astype(str), failed["http_status"], strict=True))
        kinds = Counter(_kind(o, s) for o, s in pairs)
        families = Counter(_family(o, s) for o, s in pairs)
        errors = failed["error"] if "error" in failed else pd.Series([], dtype=object)
        messages = Counter(m for m in (_short(e) for e in errors) if m)
        out[int(float(str(stage)))] = FailureMix(
            requests=int(sizes[stage]),
            kinds=tuple(sorted(kinds.items(), key=_most_first)),
            messages=tuple(messages.most_common(TOP_MESSAGES)),
            overload=families["overload"],
            stalls=families["stalls"],
            server_errors=families["server_errors"],
        )
    return out


def name_failures(knee: KneeResult, mixes: Mapping[int, FailureMix]) -> KneeResult:
    """``knee`` with each failing stage's mix in ``failures`` and as its last reason (the mix
    itself: :mod:`analysis.report.stage_reasons` words it)."""
    stages = []
    for verdict in knee.stages:
        mix = mixes.get(verdict.stage)
        if mix is None:
            stages.append(verdict)
            continue
        stages.append(replace(verdict, failures=mix, reasons=(*verdict.reasons, mix)))
    return replace(knee, stages=tuple(stages))
