"""Queueing seen from the client: how many requests the server ran at once, and how many waited.

A server that exports no ``/metrics`` (a gateway in front of the engine, a hosted endpoint,
llama-server without ``--metrics``) still leaves its queue in the client's own rows. Per stage,
from the rows alone (pure; needs TTFT, so a streamed run):

* **the wait** of a request: from its start to the moment a slot freed for it, with the
  server's slots read over the whole run from the requests decoding at once
  (:mod:`analysis.stages.slot_count`: a growing batch makes every TTFT grow too, and a wait
  read off TTFT took a batched prefill for a queue). A request is *late* when its wait is at
  least ``LATE_SHARE`` (0.15) of the stage's service time (its median decode time, first token
  to end, plus ``T1``, the single-user TTFT) and 1.5 of its steps: a queue shows as a group of
  late requests.
* **in service** and **waiting** (Little's law, measured as time averages): the number of
  requests in service at each instant of the measured window, averaged (each request's service
  is from its start plus its wait to its end), and the same for the waits. Over a steady window
  this is served requests/s × mean time in service, without estimating either. The interval is
  the same batch means over up to 10 consecutive time windows as the stage's throughput
  (:mod:`loadknee_core.confidence`, computed on arrays by
  :mod:`analysis.stages.array_intervals`: its stdlib loop over rows took 1.5 s of a 200k-row
  analysis): a Student-t 95 % interval, none below 5 windows.
* **in flight**: the same average over whole requests (start to end, failed ones included). A
  closed-loop client whose users always have a request outstanding keeps it at the stage's users;
  clearly fewer means the client did not drive the load it claims (client starvation, coordinated
  omission), see :func:`starved`.
* **the KV fill** (a length mix only, :mod:`analysis.stages.kv_grants`): the most KV the
  decoding requests held at a first token inside the window, as a share of the most the run
  held: a stage whose waits are for room, not slots, reaches it.
* **the wait share**: the share of the stage's requests whose wait exceeded a quarter of the
  stage's median service time — those that came "a service time late" — and their median wait.

:func:`client_queue_columns` returns these per stage as the record table's ``client_*`` columns
(:data:`CLIENT_QUEUE_COLUMNS`); :mod:`analysis.knee.signals` reads them as a knee signal with the
same standing as the server's own running/waiting gauges.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.stages.array_intervals import batch_count, batch_rates
from analysis.stages.groups import median
from analysis.stages.kv_grants import kv_grants
from analysis.stages.row_classes import RowClasses
from analysis.stages.slot_count import service_starts
from loadknee_core.confidence import mean_interval

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
    "client_kv_fill_pct",  # the most KV the decoding held at a first token, % of the run's most
)

#: a wait shorter than this many of the stage's steps (ITL) is admission at a step boundary
ADMISSION_STEPS = 1.5
#: a request counts as having waited for a slot when its wait is this share of a service time
LATE_SHARE = 0.15


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
    kv_fill_pct: float


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
    rates = batch_rates(ends, ends - begins, start, end, starts=begins, batches=count)
    interval = mean_interval(rates, n=len(ends)) if rates else None
    if interval is None:
        return mean, math.nan, math.nan
    return mean, max(0.0, interval.low), interval.high


def _tokens(rows: pd.DataFrame, column: str) -> np.ndarray:
    """A token-count column as floats (all NaN without it)."""
    if column not in rows:
        return np.full(len(rows), np.nan)
    return pd.to_numeric(rows[column], errors="coerce").to_numpy(dtype=float)


@dataclass(frozen=True)
class QueueRows:
    """The columns the queue figures read, as arrays over some rows in row order: read from a
    frame once (:meth:`of`), then cut per stage (:meth:`take`) with no pandas per stage."""

    judged: np.ndarray  # not cancelled (a cancelled request says nothing of the server)
    ok: np.ndarray  # judged, ok, its length not mismatched, TTFT and e2e known
    measured: np.ndarray  # phase measure or baseline (all False without a phase column)
    starts: np.ndarray  # unix s
    ends: np.ndarray
    ttft_ms: np.ndarray
    e2e_ms: np.ndarray
    itl_p50_ms: np.ndarray | None  # None without the column
    served_from: np.ndarray  # when a slot freed for the request (NaN without a first token)
    kv_fill_pct: np.ndarray  # the KV held at its first token, % of the budget (NaN: no mix)

    @classmethod
    def of(cls, rows: pd.DataFrame, classes: RowClasses | None = None) -> QueueRows:
        """The arrays of ``rows`` (a run's requests or one stage's; ``classes``: their
        :class:`~analysis.stages.row_classes.RowClasses`, when already known)."""
        classes = classes or RowClasses.of(rows)
        ttft, e2e = rows["ttft_ms"].to_numpy(dtype=float), rows["e2e_ms"].to_numpy(dtype=float)
        ok = classes.ok & ~np.isnan(ttft) & ~np.isnan(e2e)
        measured = classes.measured
        itl = rows["itl_p50_ms"].to_numpy(dtype=float) if "itl_p50_ms" in rows else None
        starts = rows["start_unix_s"].to_numpy(dtype=float)
        ends = rows["end_unix_s"].to_numpy(dtype=float)
        # every request with a first token held a slot, whatever its outcome (one cut off at
        # a stage's end held it until then): all of them enter the slot count
        timed = ~np.isnan(starts) & ~np.isnan(ends) & ~np.isnan(ttft)
        served_from = np.full(len(rows), np.nan)
        kv_fill_pct = np.full(len(rows), np.nan)
        firsts = starts[timed] + ttft[timed] / 1000.0
        by_slots = service_starts(starts[timed], firsts, ends[timed])
        # a length mix under a KV budget: room frees later than a slot would (kv_grants)
        by_kv = kv_grants(
            starts[timed], firsts, ends[timed], _tokens(rows, "prompt_tokens")[timed],
            _tokens(rows, "completion_tokens")[timed],
        )  # fmt: skip
        if by_kv is None:
            served_from[timed] = by_slots
        else:
            served_from[timed] = np.maximum(by_slots, by_kv.served_from)
            kv_fill_pct[timed] = by_kv.fill_pct
        return cls(
            classes.judged,
            ok,
            measured,
            starts,
            ends,
            ttft,
            e2e,
            itl,
            served_from,
            kv_fill_pct,
        )

    def take(self, index: np.ndarray) -> QueueRows:
        """The rows at ``index`` (positions), in that order."""
        return QueueRows(
            self.judged[index],
            self.ok[index],
            self.measured[index],
            self.starts[index],
            self.ends[index],
            self.ttft_ms[index],
            self.e2e_ms[index],
            None if self.itl_p50_ms is None else self.itl_p50_ms[index],
            self.served_from[index],
            self.kv_fill_pct[index],
        )


def _rows(rows: pd.DataFrame | QueueRows) -> QueueRows:
    return rows if isinstance(rows, QueueRows) else QueueRows.of(rows)


@dataclass(frozen=True)
class ServiceSpans:
    """Each served request of one stage seen from the client: ``starts`` (sent),
    ``served_from`` (sent + its wait for a slot), ``ends`` (unix s), whether it was ``late``
    (waited a service time), its ``wait_s``, and whether its row is ``measured`` (phase measure
    or baseline), in the same order."""

    measured: np.ndarray
    starts: np.ndarray
    served_from: np.ndarray
    ends: np.ndarray
    late: np.ndarray
    wait_s: np.ndarray


def _median(values: np.ndarray) -> float:
    """pandas' ``Series.median``: of the non-NaN values, NaN when there are none."""
    known = values[~np.isnan(values)]
    return median(known) if len(known) else math.nan


def service_spans(rows: pd.DataFrame | QueueRows, t1_ms: float) -> ServiceSpans | None:
    """The service spans of one stage's ok streamed rows (module docstring: the wait, late);
    None with fewer than two such rows."""
    q = _rows(rows)
    ok = q.ok
    if np.count_nonzero(ok) < 2:
        return None
    itl = math.nan if q.itl_p50_ms is None else _median(q.itl_p50_ms[ok])
    itl = 0.0 if math.isnan(itl) else itl
    starts, ends, ttft = q.starts[ok], q.ends[ok], q.ttft_ms[ok]
    # a service time: the decode (first token to end) plus the single-user TTFT (the prefill)
    service_ms = median(q.e2e_ms[ok] - ttft) + t1_ms
    late_ms = max(ADMISSION_STEPS * itl, LATE_SHARE * service_ms)
    wait_s = np.clip(q.served_from[ok] - starts, 0.0, None)
    late = wait_s * 1000.0 >= late_ms
    return ServiceSpans(q.measured[ok], starts, starts + wait_s, ends, late, wait_s)


def stage_queue(
    rows: pd.DataFrame | QueueRows, start: float, end: float, t1_ms: float, *, batches: int = 10
) -> StageQueue | None:
    """The queue figures of one stage from its rows (all phases: each counts for the part of it
    inside the window ``[start, end]``); None without TTFT or a usable window."""
    q = _rows(rows)
    if not end > start or len(q.starts) == 0:
        return None
    spans = service_spans(q, t1_ms)
    if spans is None:
        return None
    starts, served_from, ends = spans.starts, spans.served_from, spans.ends
    late, wait_s = spans.late, spans.wait_s
    count = batch_count(start, end, starts=starts, ends=ends, batches=batches)
    run, run_lo, run_hi = _average(served_from, ends, start, end, count)
    wait, wait_lo, wait_hi = _average(starts, served_from, start, end, count)
    all_starts, all_ends = q.starts[q.judged], q.ends[q.judged]
    keep = ~np.isnan(all_starts) & ~np.isnan(all_ends)
    overlap = np.clip(
        np.minimum(all_ends[keep], end) - np.maximum(all_starts[keep], start), 0.0, None
    )
    in_flight = float(overlap.sum() / (end - start))
    pick = spans.measured if spans.measured.any() else np.ones(len(late), dtype=bool)
    share = float(late[pick].mean() * 100.0)
    wait_ms_late = median(wait_s[pick & late]) * 1000.0 if (pick & late).any() else math.nan
    firsts = q.starts + q.ttft_ms / 1000.0
    fills = q.kv_fill_pct[(firsts >= start) & (firsts <= end)]
    fill = float(np.nanmax(fills)) if np.any(~np.isnan(fills)) else math.nan
    return StageQueue(
        run, run_lo, run_hi, wait, wait_lo, wait_hi, in_flight, share, wait_ms_late, fill
    )


def stage_positions(requests: pd.DataFrame) -> dict[Hashable, np.ndarray]:
    """Each stage's row positions in ``requests``, in row order (rows without a stage left out):
    one grouping of the whole frame, no per-stage copy of its columns."""
    return {stage: np.asarray(rows) for stage, rows in requests.groupby("stage").indices.items()}


def client_queue_columns(
    requests: pd.DataFrame,
    windows: pd.DataFrame,
    summary: pd.DataFrame,
    *,
    classes: RowClasses | None = None,
) -> pd.DataFrame:
    """The :data:`CLIENT_QUEUE_COLUMNS` per stage (index: stage; NaN where unknown).

    ``windows`` holds each stage's ``window_start``/``window_end``; ``summary`` is the record
    table so far (its TTFT medians give the single-user TTFT). The columns are read into arrays
    once (:class:`QueueRows`; ``classes``: the rows' classes, when already known); each stage's
    figures are a few array operations on its rows."""
    out = pd.DataFrame(np.nan, index=windows.index, columns=list(CLIENT_QUEUE_COLUMNS))
    t1 = single_user_ttft_ms(summary)
    if t1 is None or "ttft_ms" not in requests or requests["ttft_ms"].notna().sum() == 0:
        return out
    every = QueueRows.of(requests, classes)
    positions = stage_positions(requests)
    figures: dict[int, list[float]] = {}  # by the stage's place in ``windows``
    for place, (stage, start, end) in enumerate(
        zip(windows.index, windows["window_start"], windows["window_end"], strict=True)
    ):
        index = positions.get(stage)
        if index is None or pd.isna(start) or pd.isna(end):
            continue
        q = stage_queue(every.take(index), float(start), float(end), t1)
        if q is None:
            continue
        figures[place] = [
            q.running,
            q.running_low,
            q.running_high,
            q.waiting,
            q.waiting_low,
            q.waiting_high,
            q.in_flight,
            q.wait_share_pct,
            q.wait_ms,
            q.kv_fill_pct,
        ]
    if figures:
        out.iloc[list(figures)] = np.array(list(figures.values()), dtype=float)
    return out
