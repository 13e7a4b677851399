"""Warnings about how much the numbers rest on: stages too small to trust, runs that all failed,
stages whose load generator was late.

A percentile over 8 requests, or a throughput over 3 seconds, reads as precisely as one over
1,000; only the sample size tells them apart, so a small stage is named. A run whose every request
failed has no numbers at all: the top error causes, counted, say what to fix. A load generator
whose event loop ran late stamped every request late and sent the next one late: its latencies
and throughput there read the client, not the server. Each warning is a
record of :mod:`analysis.diagnosis.facts`; :mod:`analysis.report.diagnosis_words` words it.
"""

from __future__ import annotations

from typing import cast

import pandas as pd

from analysis.diagnosis.facts import AllFailedFact, SmallStageFact
from analysis.knee.facts import LateClientFact
from analysis.knee.late_client import late_client_fact
from analysis.stages.levels import level_rows
from loadknee_core.contract import all_failed
from loadknee_core.numeric import num

#: below these, a stage's percentiles rest on too few samples (docs/method.md: Small stage)
MIN_STAGE_REQUESTS = 20
MIN_STAGE_SECONDS = 5.0
#: how many distinct error causes to name
TOP_CAUSES = 3


def small_stage_warnings(summary: pd.DataFrame) -> list[SmallStageFact]:
    """One per level stage with too few measured requests or seconds (a stage with none
    is not judged at all, and its verdict says why: holding it longer is not the fix)."""
    out = []
    steps = level_rows(summary)
    for row in steps.to_dict(orient="records"):
        n, secs = num(row.get("requests")), num(row.get("window_s"))
        if n == 0:  # no request at all: not judged ("insufficient data"), said there
            continue
        few = n is not None and n < MIN_STAGE_REQUESTS
        short = secs is not None and secs < MIN_STAGE_SECONDS
        if few or short:
            out.append(
                SmallStageFact(
                    users=int(row["target_users"]),
                    requests=int(n or 0),
                    window_s=secs or 0.0,
                    min_requests=MIN_STAGE_REQUESTS,
                    min_seconds=MIN_STAGE_SECONDS,
                )
            )
    return out


def late_client_warnings(summary: pd.DataFrame) -> list[LateClientFact]:
    """One per stage (the baseline too: its latency is the yardstick) whose load generator was
    late against its latency, by the knee's own rule (:mod:`analysis.knee.late_client`). Runs
    recorded before the lag was measured give none."""
    if "client_lag_mean_ms" not in summary:
        return []
    facts = (late_client_fact(row) for row in summary.to_dict(orient="records"))
    return [f for f in facts if f is not None and f.late]


#: the columns a failed row's cause is read from (:func:`~loadknee_core.contract.failure_cause`)
CAUSE_COLUMNS = ("outcome", "http_status", "error")


def _records(requests: pd.DataFrame) -> list[dict[str, object]]:
    records = requests[[c for c in CAUSE_COLUMNS if c in requests]].to_dict(orient="records")
    return cast("list[dict[str, object]]", records)


def all_failed_warnings(requests: pd.DataFrame) -> list[AllFailedFact]:
    """One when the run has requests and none succeeded."""
    if requests.empty or "outcome" not in requests or (requests["outcome"] == "ok").any():
        return []
    failed = all_failed(_records(requests), top=TOP_CAUSES)
    return [] if failed is None else [AllFailedFact(failed[0], tuple(failed[1]))]
