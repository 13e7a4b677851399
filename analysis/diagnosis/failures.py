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

import ipaddress
from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import urlsplit

import pandas as pd

from analysis.diagnosis.facts import AllFailedFact, SharedHostFact, SmallStageFact
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
#: a 1-minute load per CPU at or above this is an overloaded machine: 1.5 runnable threads per
#: core, so each waits a third of its time (docs/method.md: Shared host)
OVERLOADED_PER_CPU = 1.5


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


def overloaded_stages(
    summary: pd.DataFrame, run_info: Mapping[str, Any]
) -> tuple[SharedHostFact, ...]:
    """Each stage where a server on the load generator's own machine (a loopback target) met
    that machine overloaded: its 1-minute load per CPU at or above :data:`OVERLOADED_PER_CPU`
    (in the summary's order; none for a remote server or a run without the host's load).

    Why: a server on 127.0.0.1 shares the CPU with the load generator and whatever else runs
    there; on an overloaded machine its step times include the CPU it waited for, and the knee
    reads the machine, not the server (a fresh machine under a CPU hog, load 3.8 on 2 cores: a
    compute-bound simulator's 8-user stage read ±12.5 %, noisy). A late load generator shows in
    its own loop's lag (:func:`late_client_warnings`); a starved server shows only here."""
    host = _loopback_host(run_info.get("target_url"))
    if host is None or "host_load_1m" not in summary or "host_cpus" not in summary:
        return ()
    out = []
    for row in summary.to_dict(orient="records"):
        load, cpus = num(row.get("host_load_1m")), num(row.get("host_cpus"))
        if load is None or not cpus or load / cpus < OVERLOADED_PER_CPU:
            continue
        out.append(SharedHostFact(int(row["target_users"]), load, int(cpus), host,
                                  OVERLOADED_PER_CPU))  # fmt: skip
    return tuple(out)


def shared_host_warning(
    summary: pd.DataFrame, run_info: Mapping[str, Any]
) -> SharedHostFact | None:
    """The overloaded stage (:func:`overloaded_stages`) where the load per CPU was highest (the
    first of equals): the run's one warning about its shared machine."""
    worst: SharedHostFact | None = None
    for fact in overloaded_stages(summary, run_info):
        if (
            worst is None
            or fact.host_load_1m / fact.host_cpus > worst.host_load_1m / worst.host_cpus
        ):
            worst = fact
    return worst


def _loopback_host(url: Any) -> str | None:
    """The host of ``url`` when it is this machine's loopback (127.0.0.0/8, ::1, localhost)."""
    if not isinstance(url, str) or not url:
        return None
    host = urlsplit(url if "://" in url else "http://" + url).hostname
    if host is None:
        return None
    if host == "localhost":
        return host
    try:
        return host if ipaddress.ip_address(host).is_loopback else None
    except ValueError:
        return None


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
