"""Did every request of a run fail? Then say why, with the top error causes counted.

Why: a sweep against a wrong target used to exit 0, its only hint buried in the log. Read with
the ``csv`` module (no pandas in the wrapper process), once, after Locust has exited.
"""

from __future__ import annotations

import csv
from pathlib import Path

from loadknee_core.contract import REQUESTS_CSV, all_failed_summary


def all_failed_text(run_dir: str | Path) -> str | None:
    """One line when the run has requests and none succeeded; None otherwise."""
    path = Path(run_dir) / REQUESTS_CSV
    if not path.is_file():
        return None
    with path.open(newline="", encoding="utf-8") as f:
        summary = all_failed_summary(csv.DictReader(f))
    return None if summary is None else f"{summary}; nothing to analyse"
