"""Request events → ``requests.csv`` (and stage facts → ``stages.csv``), losing nothing in any mode.

Columns are :data:`loadknee_core.contract.REQUEST_COLUMNS` (units in the names; see
contract.py). The user classes put every field except ``stage``, ``phase`` and ``worker`` into
``context["loadknee"]`` of exactly one Locust ``request`` event per request; events without that
key (Locust's own, a user's custom ones) are ignored.

* local runner: each event's row is labelled and written at once;
* worker: rows are buffered and shipped inside ``report_to_master`` (``data["loadknee_rows"]``),
  which Locust also sends once more on quit, so nothing is left behind;
* master: rows from every worker's report are labelled and written by this one process.

The stage and phase of a row come from the :class:`~loadknee_locust.sweep.schedule.Schedule` by the
request's *start* time (an open-loop request's *planned* send, ``intended_unix_s``: one that
waited for a slot past its window's end still belongs to the window), so late rows (worker
reports lag up to 3 s) land in the right stage. Every row is flushed as it is written (one
``write()`` each, a few µs), so a run killed with SIGKILL leaves files that parse and loses no
finished request; ``CsvSink``'s own 1 s flush would leave up to a second of rows in the buffer,
and a buffer overflow could write half a row.
:class:`StageStats` keeps per-stage counts and a bounded list of latencies for the shape (request
counts, red line) and the web UI's live tab; percentiles there use stdlib only.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from loadknee_core.contract import (
    NOT_ERROR_OUTCOMES,
    NOT_JUDGED_OUTCOMES,
    REQUEST_COLUMNS,
    REQUESTS_CSV,
    STAGE_COLUMNS,
    STAGES_CSV,
    SUCCESS_OUTCOMES,
)
from loadknee_core.refusals import Failure
from loadknee_locust.client.timing import percentile as sorted_percentile
from loadknee_locust.record.clocksync import REPORT_CLOCK_KEY, WorkerClocks
from loadknee_locust.record.csvsink import CsvSink
from loadknee_locust.sweep.schedule import Schedule, StageRecord

log = logging.getLogger(__name__)

CONTEXT_KEY = "loadknee"
REPORT_KEY = "loadknee_rows"
LATENCY_CAP = 20_000  # latencies kept per stage for the live tab (the CSV keeps every row)
_COLUMNS = frozenset(REQUEST_COLUMNS)
NOT_ERRORS = frozenset(NOT_ERROR_OUTCOMES)


def request_row(context: Any, worker: str) -> dict[str, Any] | None:
    """The contract row carried by one request event, or None when the event is not ours.

    Keys outside the contract are dropped (logged once by the caller), ``worker`` is set here.
    """
    if not isinstance(context, Mapping):
        return None
    fields = context.get(CONTEXT_KEY)
    if not isinstance(fields, Mapping):
        return None
    row = {k: v for k, v in fields.items() if k in _COLUMNS}
    row["worker"] = worker
    return row


def percentile(values: Iterable[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), ``q`` in 0..100; None when empty."""
    data = sorted(values)
    return sorted_percentile(data, q) if data else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


class StageStats:
    """Running per-stage numbers: counts of every row, latencies of the measured ones."""

    def __init__(self, stage: int) -> None:
        self.stage = stage
        self.ended = 0  # every row labelled with this stage, a cancelled one too (open loop:
        # the planned sends so far less these are the backlog)
        self.requests = 0  # every completed request labelled with this stage, any phase
        self.served = 0  # measured rows answered ok (open loop: the served rate)
        self.measured = 0  # phase measure/baseline
        self.errors = 0  # measured rows whose outcome is an error
        self.e2e_ms: deque[float] = deque(maxlen=LATENCY_CAP)  # measured, not errors
        #: measured failures, for the sweep's refusal check (loadknee_core.refusals)
        self.failures: deque[Failure] = deque(maxlen=LATENCY_CAP)
        self.ttft_ms: deque[float] = deque(maxlen=LATENCY_CAP)
        self.completion_tokens = 0.0
        self.busy_s = 0.0  # summed e2e of the measured ok requests
        # prefix cache, from the measured ok rows whose server reported cached_tokens
        self.cache_prompt_tokens = 0.0
        self.cached_tokens = 0.0
        self.hit_ttft_ms: deque[float] = deque(maxlen=LATENCY_CAP)  # any cached token
        self.miss_ttft_ms: deque[float] = deque(maxlen=LATENCY_CAP)

    def add(self, row: Mapping[str, Any]) -> None:
        self.ended += 1
        if row.get("outcome") in NOT_JUDGED_OUTCOMES:
            return  # our own stop cut it: not a completed request, not an error
        self.requests += 1
        if row.get("phase") not in ("measure", "baseline"):
            return
        self.measured += 1
        if row.get("outcome") not in NOT_ERRORS:
            self.errors += 1
            status = _number(row.get("http_status"))
            self.failures.append(
                Failure(
                    str(row.get("outcome") or ""),
                    None if status is None else int(status),
                    str(row.get("error") or ""),
                    _number(row.get("e2e_ms")),
                )
            )
            return
        self.served += row.get("outcome") in SUCCESS_OUTCOMES
        for key, into in (("e2e_ms", self.e2e_ms), ("ttft_ms", self.ttft_ms)):
            value = _number(row.get(key))
            if value is not None:
                into.append(value)
        e2e_ms = _number(row.get("e2e_ms"))
        if e2e_ms is not None:
            self.completion_tokens += _number(row.get("completion_tokens")) or 0.0
            self.busy_s += e2e_ms / 1000.0
        self._add_cache(row)

    def _add_cache(self, row: Mapping[str, Any]) -> None:
        cached, prompt = _number(row.get("cached_tokens")), _number(row.get("prompt_tokens"))
        if cached is None or prompt is None:
            return  # the server does not report cached tokens (or the row has no usage)
        self.cache_prompt_tokens += prompt
        self.cached_tokens += cached
        ttft = _number(row.get("ttft_ms"))
        if ttft is not None:
            (self.hit_ttft_ms if cached > 0 else self.miss_ttft_ms).append(ttft)

    def cache_hit_pct(self) -> float | None:
        """Cached over prompt tokens of the measured rows that carry ``cached_tokens`` (the
        responses' usage: live, client-side; the report's hit rate is the server's counters')."""
        if self.cache_prompt_tokens <= 0:
            return None
        return 100.0 * self.cached_tokens / self.cache_prompt_tokens

    def output_tokens_per_s(self, users: int) -> float | None:
        """Live output tokens/s of a closed loop of ``users``: each user streams its requests'
        tokens back to back, so the rate is users × tokens / time spent in requests (Little's
        law). Unlike tokens over first-start..last-end it does not count the stragglers that end
        in the cooldown; the analysis still recomputes it exactly from requests.csv."""
        if self.busy_s <= 0:
            return None
        return users * self.completion_tokens / self.busy_s


class RunLog:
    """The open run on the master / local runner: its CSV files, schedule and per-stage stats."""

    def __init__(self, run_dir: str | os.PathLike[str], batch_size: int | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.batch_size = batch_size
        self.requests = CsvSink(self.run_dir / REQUESTS_CSV, REQUEST_COLUMNS)
        self.stages = CsvSink(self.run_dir / STAGES_CSV, STAGE_COLUMNS)
        self.schedule: Schedule | None = None
        self.stats: dict[int, StageStats] = {}
        self.stage_records: list[StageRecord] = []
        self.test_stopped = False  # test_stop seen; still open for late worker rows
        self.failures_in_a_row = 0  # rows with an error outcome since the last served one
        self.failing_since: float | None = None  # end of the first of them (unix s)
        self.last_failure = ""  # its short error, for the message that stops the sweep
        self.curve_track: Any = None  # a curve replay's InflightTrack: fed each row's span

    @property
    def closed(self) -> bool:
        return self.requests.closed

    def add(self, row: dict[str, Any]) -> None:
        """Label one row with its stage and phase, count it, write it."""
        if self.closed:
            log.warning("loadknee: a request row arrived after the run was closed; dropped")
            return
        start, end = _number(row.get("start_unix_s")), _number(row.get("end_unix_s"))
        if self.curve_track is not None and start is not None and end is not None:
            self.curve_track.add(start, end)
        # a row our own stop cancelled is written and labelled, but counts as no completion
        judged = row.get("outcome") not in NOT_JUDGED_OUTCOMES
        # open loop: a request belongs where it was planned, however late a full cap sent it
        planned = _number(row.get("intended_unix_s"))
        if self.schedule is not None and start is not None:
            at = start if planned is None else planned
            row["stage"], row["phase"] = self.schedule.locate(at)
            if judged:
                served = row.get("outcome") == "ok" and row.get("length_ok") != 0
                tokens = _number(row.get("completion_tokens")) if served else None
                self.schedule.observe(
                    start,
                    end if end is not None else start,
                    tokens=tokens,
                    ttft_s=(_number(row.get("ttft_ms")) or 0.0) / 1000.0,
                )
        stage = row.get("stage")
        if isinstance(stage, int):
            self.stats.setdefault(stage, StageStats(stage)).add(row)
        if judged:
            self._count_streak(row, end)
        self.requests.write(row)
        # one write() per row: a kill can cut at most the row being written, never an older one
        self.requests.flush()

    def _count_streak(self, row: Mapping[str, Any], end: float | None) -> None:
        if row.get("outcome") in NOT_ERRORS:
            self.failures_in_a_row, self.failing_since = 0, None
            return
        self.failures_in_a_row += 1
        self.last_failure = str(row.get("error") or row.get("outcome") or "")
        if self.failing_since is None:
            self.failing_since = end

    def total_failure(self, now: float, *, rows: int, seconds: float) -> bool:
        """Every request has failed for at least ``seconds`` and ``rows`` rows: a dead target."""
        since = self.failing_since
        return self.failures_in_a_row >= rows and since is not None and now - since >= seconds

    def add_stages(self, records: Iterable[StageRecord]) -> None:
        for rec in records:
            self.stage_records.append(rec)
            if not self.closed:
                self.stages.write(rec.as_row(self.batch_size))
                self.stages.flush()

    def stage_stats(self, stage: int) -> StageStats:
        return self.stats.setdefault(stage, StageStats(stage))

    def flush(self) -> None:
        self.requests.flush()
        self.stages.flush()

    def close(self) -> None:
        """Flush and close both files; safe twice."""
        self.requests.close()
        self.stages.close()


class RequestRecorder:
    """The Locust listeners: ``request`` events to rows, rows to the open :class:`RunLog`.

    ``current_run`` returns the run to write into (None on a worker, or before a run began:
    rows are then buffered for the next ``report_to_master``, or for the run when it opens).
    ``clocks`` (master): worker rows are moved onto the master's clock as they arrive, before
    they are placed (see :mod:`loadknee_locust.record.clocksync`).
    """

    def __init__(
        self,
        worker: Callable[[], str],
        current_run: Callable[[], RunLog | None],
        clocks: WorkerClocks | None = None,
    ) -> None:
        self._worker = worker
        self._current_run = current_run
        self.clocks = clocks
        self.buffer: list[dict[str, Any]] = []
        self._warned_keys = False

    def on_request(self, context: Any = None, **_: Any) -> None:
        row = request_row(context, self._worker())
        if row is None:
            return
        if not self._warned_keys and isinstance(context, Mapping):
            extra = set(context[CONTEXT_KEY]) - _COLUMNS
            if extra:
                self._warned_keys = True
                log.warning("loadknee: dropped keys outside the contract: %s", sorted(extra))
        self._take([row])

    def on_report_to_master(self, client_id: Any = None, data: Any = None, **_: Any) -> None:
        """Worker: ship the rows gathered since the last report."""
        if data is not None and self.buffer:
            data[REPORT_KEY], self.buffer = self.buffer, []

    def on_worker_report(self, client_id: Any = None, data: Any = None, **_: Any) -> None:
        """Master: take the rows a worker shipped (on the master's clock)."""
        if not isinstance(data, Mapping):
            return
        clocks = self.clocks
        if clocks is not None:  # the report's own clock facts first: they correct its rows
            clocks.observe(data.get(REPORT_CLOCK_KEY), time.time())
        rows = [r for r in data.get(REPORT_KEY) or () if isinstance(r, dict)]
        if clocks is not None:
            rows = [clocks.to_master(str(r.get("worker", "")), r) for r in rows]
        if rows:
            self._take(rows)

    def drain_into(self, run: RunLog) -> None:
        """Write rows that arrived before the run was open (local/master only)."""
        rows, self.buffer = self.buffer, []
        for row in rows:
            self._write(run, row)

    def _take(self, rows: list[dict[str, Any]]) -> None:
        run = self._current_run()
        if run is None:
            self.buffer.extend(rows)
            return
        for row in rows:
            self._write(run, row)

    @staticmethod
    def _write(run: RunLog, row: dict[str, Any]) -> None:
        try:
            run.add(row)
        except Exception:  # a bad row must not end the run (Locust exits 2 on listener errors)
            log.exception("loadknee: could not record a request row")
