"""Did every request of a run fail? Then say why, with the top error causes counted.

Why: a sweep against a wrong target used to exit 0, its only hint buried in the log. Read with
the ``csv`` module (no pandas in the wrapper process), once, after Locust has exited.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from loadknee_locust.contract import NOT_JUDGED_OUTCOMES, REQUESTS_CSV

#: how many distinct causes to list
TOP = 3


def error_causes(rows: list[dict[str, str]]) -> Counter[str]:
    """Failed rows counted by cause: the short error, else the HTTP status, else the outcome."""
    causes: Counter[str] = Counter()
    for row in rows:
        if row.get("outcome") == "ok":
            continue
        status = row.get("http_status") or ""
        cause = row.get("error") or (f"HTTP {status}" if status else "") or row.get("outcome", "")
        causes[cause or "unknown"] += 1
    return causes


def all_failed_text(run_dir: str | Path) -> str | None:
    """One line when the run has requests and none succeeded; None otherwise."""
    path = Path(run_dir) / REQUESTS_CSV
    if not path.is_file():
        return None
    with path.open(newline="", encoding="utf-8") as f:
        # a request our own stop cancelled says nothing about the target: not a failure here
        rows = [r for r in csv.DictReader(f) if r.get("outcome") not in NOT_JUDGED_OUTCOMES]
    if not rows or any(row.get("outcome") == "ok" for row in rows):
        return None
    top = ", ".join(f"{n} × {cause}" for cause, n in error_causes(rows).most_common(TOP))
    return f"all {len(rows)} requests failed ({top}); nothing to analyse"
