"""Queueing seen from the client: how many requests the server ran at once, and how many waited.

A server that exports no ``/metrics`` (a gateway in front of the engine, a hosted endpoint,
llama-server without ``--metrics``) still leaves its queue in the client's own rows. Per stage,
from the rows alone (pure; needs TTFT, so a streamed run):

* **the wait** of a request: its time to first token beyond ``T1``, the single-user median
  TTFT (the baseline stage's, else the lowest level's), less the stage's own unqueued excess:
  the 10th percentile of the excess of the requests that were not late (admission at a step
  boundary, a slower first step, a busy client: what a request admitted at once pays). A
  request is *late* — it came "a service time late" — when its excess is at least
  ``LATE_SHARE`` (0.15) of the stage's service time (its median decode time, first token to end,
  plus ``T1``) and 1.5 of its steps. A queue with requests in step shows as a separate group of
  late requests; one whose requests are out of step makes many short waits, which the floor
  still counts. Taking the floor from the stage itself, not from ``T1`` plus an allowance, keeps
  a busy client from reading as a queue: the 28-slot simulator at 26 users on busy cores had TTFT
  86 ms against 15 ms alone, every request alike, and a fixed allowance read 0.8 waiting.
* **in service** and **waiting** (Little's law, measured as time averages): the number of
  requests in service at each instant of the measured window, averaged (each request's service
  is from its start plus its wait to its end), and the same for the waits. Over a steady window
  this is served requests/s × mean time in service, without estimating either. The interval is
  the same batch means over up to 10 consecutive time windows as the stage's throughput
  (:mod:`loadknee_locust.sweep.confidence`): a Student-t 95 % interval, none below 5 windows.
* **in flight**: the same average over whole requests (start to end, failed ones included). A
  closed-loop client whose users always have a request outstanding keeps it at the stage's users;
  clearly fewer means the client did not drive the load it claims (client starvation, coordinated
  omission), see :func:`starved`.
* **the wait share**: the share of the stage's requests whose wait exceeded a quarter of the
  stage's median service time — those that came "a service time late" — and their median wait.

:func:`client_queue_columns` returns these per stage as the record table's ``client_*`` columns
(:data:`CLIENT_QUEUE_COLUMNS`); :mod:`analysis.knee.signals` reads them as a knee signal with the
same standing as the server's own running/waiting gauges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from loadknee_locust.contract import NOT_JUDGED_OUTCOMES
from loadknee_locust.sweep.confidence import batch_count, batch_rates, mean_interval

#: the record-table columns this module fills (NaN where they cannot be computed)
CLIENT_QUEUE_COLUMNS: tuple[str, ...] = (
    "client_running",  # requests in service on average (time average over the window)
    "client_running_low",
    "client_running_high",
    "client_waiting",  # requests waiting on average, by their TTFT excess
    "client_waiting_low",
    "client_waiting_high",
    "client_in_flight",  # requests outstanding on average (start to end)
    "client_wait_share_pct",  # % of requests whose first token came 0.15 service time late
    "client_wait_ms",  # median wait of those requests
)

#: an unqueued request waits up to this many of the stage's steps (ITL) beyond the 1-user TTFT
ADMISSION_STEPS = 1.5
#: a request counts as having waited for a slot when its wait is this share of a service time
LATE_SHARE = 0.15
#: the unqueued excess: this percentile of the excess of the requests that were not late
FLOOR_PCT = 10.0


@dataclass(frozen=True)
class StageQueue:
    """One stage's client-side queue figures (see the module docstring)."""

    running: float
    running_low: float
    running_high: float
    waiting: float
    waiting_low: float
    waiting_high: float
    in_flight: float
    wait_share_pct: float
    wait_ms: float


def single_user_ttft_ms(summary: pd.DataFrame) -> float | None:
    """The single-user median TTFT: the baseline stage's, else the lowest level's (per user)."""
    if "ttft_p50_ms" not in summary:
        return None
    base = summary[summary["kind"] == "baseline"]["ttft_p50_ms"].dropna()
    if len(base):
        return float(base.iloc[0])
    steps = summary[summary["ttft_p50_ms"].notna()].sort_values("target_users")
    if steps.empty:
        return None
    return float(steps.iloc[0]["ttft_p50_ms"])


def _average(
    begins: np.ndarray, ends: np.ndarray, start: float, end: float, count: int
) -> tuple[float, float, float]:
    """The time-averaged number of intervals ``[begin, end]`` open in the window, with its
    batch-means interval (NaN bounds below 5 windows)."""
    length = end - start
    overlap = np.clip(np.minimum(ends, end) - np.maximum(begins, start), 0.0, None)
    mean = float(overlap.sum() / length)
    rates = batch_rates(
        list(ends), list(ends - begins), start, end, starts_s=list(begins), batches=count
    )
    interval = mean_interval(rates, n=len(ends)) if rates else None
    if interval is None:
        return mean, math.nan, math.nan
    return mean, max(0.0, interval.low), interval.high


@dataclass(frozen=True)
class ServiceSpans:
    """Each served request of one stage seen from the client: ``starts`` (sent),
    ``served_from`` (sent + its wait for a slot), ``ends`` (unix s), whether it was ``late``
    (waited a service time), and the ``ok`` rows they come from, in the same order."""

    ok: pd.DataFrame
    starts: np.ndarray
    served_from: np.ndarray
    ends: np.ndarray
    late: np.ndarray
    wait_s: np.ndarray


def service_spans(rows: pd.DataFrame, t1_ms: float) -> ServiceSpans | None:
    """The service spans of one stage's ok streamed rows (module docstring: the wait, the
    floor, late); None with fewer than two such rows."""
    judged = rows[~rows["outcome"].isin(NOT_JUDGED_OUTCOMES)]
    ok = judged[(judged["outcome"] == "ok") & (judged.get("length_ok", 1) != 0)]
    ok = ok[ok["ttft_ms"].notna() & ok["e2e_ms"].notna()]
    if len(ok) < 2:
        return None
    itl = ok["itl_p50_ms"].median() if "itl_p50_ms" in ok else math.nan
    itl = 0.0 if pd.isna(itl) else float(itl)
    starts = ok["start_unix_s"].to_numpy(dtype=float)
    ends = ok["end_unix_s"].to_numpy(dtype=float)
    ttft = ok["ttft_ms"].to_numpy(dtype=float)
    excess = ttft - t1_ms
    # a service time: the decode (first token to end) plus the single-user TTFT (the prefill)
    service_ms = float(np.median(ok["e2e_ms"].to_numpy(dtype=float) - ttft)) + t1_ms
    late_ms = max(ADMISSION_STEPS * itl, LATE_SHARE * service_ms)
    late = excess >= late_ms
    # the stage's own unqueued excess (admission at a step boundary, a slower first step, a
    # busy client): what the requests that did not wait paid beyond the single-user TTFT
    floor = float(np.percentile(excess[~late], FLOOR_PCT)) if (~late).any() else 0.5 * itl
    wait_ms = excess - max(0.0, floor)
    wait_s = np.minimum(np.clip(wait_ms, 0, None) / 1000.0, ends - starts)
    return ServiceSpans(ok, starts, starts + wait_s, ends, late, wait_s)


def running_at(spans: ServiceSpans, times: np.ndarray) -> np.ndarray:
    """The client's count of requests in service at each instant of ``times`` (unix s): the
    same spans as ``client_running``, read where the server's gauge was sampled, so the two can
    be compared sample for sample (a gauge's mean over a few scrapes is itself a sample)."""
    t = np.asarray(times, dtype=float)[:, None]
    return ((spans.served_from[None, :] <= t) & (t < spans.ends[None, :])).sum(axis=1)


def in_flight_at(rows: pd.DataFrame, times: np.ndarray) -> np.ndarray:
    """The client's requests outstanding (sent, not yet ended; every judged outcome) at each
    instant of ``times``."""
    judged = rows[~rows["outcome"].isin(NOT_JUDGED_OUTCOMES)]
    starts = judged["start_unix_s"].to_numpy(dtype=float)[None, :]
    ends = judged["end_unix_s"].to_numpy(dtype=float)[None, :]
    t = np.asarray(times, dtype=float)[:, None]
    return ((starts <= t) & (t < ends)).sum(axis=1)


def stage_queue(
    rows: pd.DataFrame, start: float, end: float, t1_ms: float, *, batches: int = 10
) -> StageQueue | None:
    """The queue figures of one stage from its rows (all phases: each counts for the part of it
    inside the window ``[start, end]``); None without TTFT or a usable window."""
    if not end > start or rows.empty:
        return None
    spans = service_spans(rows, t1_ms)
    if spans is None:
        return None
    ok, starts, served_from, ends = spans.ok, spans.starts, spans.served_from, spans.ends
    late, wait_s = spans.late, spans.wait_s
    judged = rows[~rows["outcome"].isin(NOT_JUDGED_OUTCOMES)]
    count = batch_count(start, end, starts_s=list(starts), ends_s=list(ends), batches=batches)
    run, run_lo, run_hi = _average(served_from, ends, start, end, count)
    wait, wait_lo, wait_hi = _average(starts, served_from, start, end, count)
    all_starts = judged["start_unix_s"].to_numpy(dtype=float)
    all_ends = judged["end_unix_s"].to_numpy(dtype=float)
    keep = ~np.isnan(all_starts) & ~np.isnan(all_ends)
    overlap = np.clip(
        np.minimum(all_ends[keep], end) - np.maximum(all_starts[keep], start), 0.0, None
    )
    in_flight = float(overlap.sum() / (end - start))
    measured = ok["phase"].isin(("measure", "baseline")).to_numpy()
    pick = measured if measured.any() else np.ones(len(ok), dtype=bool)
    share = float(late[pick].mean() * 100.0)
    wait_ms_late = (
        float(np.median(wait_s[pick & late]) * 1000.0) if (pick & late).any() else math.nan
    )
    return StageQueue(run, run_lo, run_hi, wait, wait_lo, wait_hi, in_flight, share, wait_ms_late)


def client_queue_columns(
    requests: pd.DataFrame, windows: pd.DataFrame, summary: pd.DataFrame
) -> pd.DataFrame:
    """The :data:`CLIENT_QUEUE_COLUMNS` per stage (index: stage; NaN where unknown).

    ``windows`` holds each stage's ``window_start``/``window_end``; ``summary`` is the record
    table so far (its TTFT medians give the single-user TTFT)."""
    out = pd.DataFrame(np.nan, index=windows.index, columns=list(CLIENT_QUEUE_COLUMNS))
    t1 = single_user_ttft_ms(summary)
    if t1 is None or "ttft_ms" not in requests or requests["ttft_ms"].notna().sum() == 0:
        return out
    by_stage = dict(tuple(requests.groupby("stage")))
    for stage, start, end in zip(
        windows.index, windows["window_start"], windows["window_end"], strict=True
    ):
        rows = by_stage.get(stage)
        if rows is None or pd.isna(start) or pd.isna(end):
            continue
        q = stage_queue(rows, float(start), float(end), t1)
        if q is None:
            continue
        out.loc[stage] = [
            q.running,
            q.running_low,
            q.running_high,
            q.waiting,
            q.waiting_low,
            q.waiting_high,
            q.in_flight,
            q.wait_share_pct,
            q.wait_ms,
        ]
    return out
