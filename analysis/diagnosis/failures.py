"""Warnings about how much the numbers rest on: stages too small to trust, runs that all failed.

A percentile over 8 requests, or a throughput over 3 seconds, reads as precisely as one over
1,000; only the sample size tells them apart, so a small stage is named. A run whose every request
failed has no numbers at all: the top error causes, counted, say what to fix.
"""

from __future__ import annotations

import pandas as pd

from analysis import rules
from analysis.numeric import counted, num
from analysis.stages.summary import level_rows
from loadknee_locust.contract import NOT_JUDGED_OUTCOMES

#: below these, a stage's percentiles rest on too few samples (docs/method.md: Small stage)
MIN_STAGE_REQUESTS = 20
MIN_STAGE_SECONDS = 5.0
#: how many distinct error causes to name
TOP_CAUSES = 3


def small_stage_warnings(summary: pd.DataFrame) -> list[str]:
    """One line per level stage with too few measured requests or seconds."""
    out = []
    steps = level_rows(summary)
    for row in steps.to_dict(orient="records"):
        n, secs = num(row.get("requests")), num(row.get("window_s"))
        few = n is not None and n < MIN_STAGE_REQUESTS
        short = secs is not None and secs < MIN_STAGE_SECONDS
        if few or short:
            out.append(
                f"{counted(int(row['target_users']), 'user')}: only "
                f"{counted(int(n or 0), 'request')} over "
                f"{secs or 0:.1f} s measured (fewer than {MIN_STAGE_REQUESTS} or under "
                f"{MIN_STAGE_SECONDS:g} s): too small to trust its percentiles; hold the stage "
                f"longer {rules.cite('small_stage')}"
            )
    return out


def error_causes(requests: pd.DataFrame) -> list[tuple[str, int]]:
    """Failed requests counted by cause (short error, else HTTP status, else outcome)."""
    if requests.empty or "outcome" not in requests:
        return []
    failed = requests[(requests["outcome"] != "ok") & ~_cancelled(requests)]
    if failed.empty:
        return []
    cause = pd.Series("", index=failed.index, dtype=object)
    if "error" in failed:
        cause = failed["error"].fillna("").astype(str)
    if "http_status" in failed:
        status = pd.to_numeric(failed["http_status"], errors="coerce")
        http = "HTTP " + status.fillna(0).astype(int).astype(str)
        cause = cause.where(cause != "", http.where(status.notna(), ""))
    cause = cause.where(cause != "", failed["outcome"].astype(str))
    counts = cause.value_counts()
    return [(str(k), int(v)) for k, v in counts.head(TOP_CAUSES).items()]


def all_failed_warnings(requests: pd.DataFrame) -> list[str]:
    """One line when the run has requests and none succeeded."""
    if requests.empty or "outcome" not in requests or (requests["outcome"] == "ok").any():
        return []
    judged = requests[~_cancelled(requests)]  # our own stop's cancellations are no failures
    if judged.empty:
        return []
    top = ", ".join(f"{n} × {cause}" for cause, n in error_causes(judged))
    return [f"all {len(judged)} requests failed ({top}) {rules.cite('all_failed')}"]


def _cancelled(requests: pd.DataFrame) -> pd.Series:
    return requests["outcome"].isin(NOT_JUDGED_OUTCOMES)
