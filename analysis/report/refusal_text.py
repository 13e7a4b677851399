"""The screen's words for a server that refuses past its own limit (issue 39, item 3).

Why: "bound by errors" hid that every failure was the server's own 429 "Model is overloaded";
a user reading it caps the server below the limit it already enforces. The judgement is made
elsewhere (:func:`analysis.knee.refusal_signal.refusal_limit`, counted by
:mod:`analysis.stages.refusals`); this module only says it, naming the status and message the
server sent.
"""

from __future__ import annotations

from analysis.knee.refusal_signal import refusal_limit
from analysis.pipeline import Analysis
from analysis.stages.refusals import StageRefusals, stage_refusals
from analysis.stages.summary import measured_requests
from loadknee_core.numeric import counted


def refusal_sentence(limit: int, users: int, total: int, found: StageRefusals | None) -> str:
    """``the server refuses above ~10: HTTP 429 'Model is overloaded' (12 of 67 requests at
    11 users turned away at once)``."""
    said = ""
    if found is not None:
        status = "" if found.http_status is None else f"HTTP {found.http_status}"
        message = found.message
        if status and message.startswith(status):
            message = message[len(status) :].strip(" :")
        named = " ".join(p for p in (status, f"'{message}'" if message else "") if p)
        said = f": {named}" if named else ""
    count = "" if found is None else f"{found.refused} of {total} requests at "
    return (
        f"the server refuses above ~{limit}{said} ({count}{counted(users, 'user')} turned "
        "away at once)"
    )


def refusal_line(analysis: Analysis) -> str | None:
    """The sentence for the run's refusing limit, or None when refusals did not bind."""
    knee = analysis.knee
    verdict = refusal_limit(knee)
    if verdict is None or knee.max_concurrency is None:
        return None
    found = stage_refusals(measured_requests(analysis.run)).get(verdict.stage)
    row = analysis.summary[analysis.summary["stage"] == verdict.stage]
    total = int(row["ok"].iloc[0] + row["errors"].iloc[0]) if len(row) else 0
    return refusal_sentence(knee.max_concurrency, verdict.target_users, total, found)
