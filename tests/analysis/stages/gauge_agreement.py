"""Test instrument: the client's running estimate against the server's own running gauge, sample
for sample (no product code reads it; the tests of the estimate do).

:mod:`analysis.stages.client_queue` estimates from the client's rows alone how many requests the
server had in service at each instant (``client_running`` is its time average over the stage's
window). Where the server's ``/metrics`` were scraped too, the two can be checked against each
other. Comparing the time average with the mean of the gauge's few scrapes in the window mixes
the estimate's error with the gauge's sampling error: a 3 s window at the default 0.5 s interval
holds ~6 scrapes, and requests that start and end together (a slot-bound server in lockstep) make
each scrape a coin toss between "all" and "some" — a CI run read 6.07 estimated against 5.50 on
the gauge from that alone. So the client's count is read at the gauge's own sample instants
(:func:`running_at`, the instant recorded for each scrape: the
midpoint of its request) and averaged over the same samples.

One more thing separates the two views: a request in transit. When a batch of requests ends
together, the server's gauge drops at once while the client reads each last chunk and sends the
next request a little later; a scrape in that gap sees requests in neither of the server's
counts that the client still has outstanding (a 28-slot simulator at 32 users read 10 running
and 0 waiting with all 32 in flight at the client; the other scrapes read 28 + 4). At such an
instant neither count is wrong, they count different things. A sample is compared only where
the server's running + waiting account for the client's requests in flight at that instant
(within :data:`ACCOUNTED_SHARE`): there the question is the one the estimate answers, how the
requests outstanding split into running and waiting. A sample whose gauge shows requests waiting
beside a free slot (fewer running than the most the server ever ran) is left out too: those are
being admitted (the next engine step, a prefill budget), which the client cannot tell from their
prefill (a KV-bound simulator at 8 users, room for 21, read 6.25 running and 1.75 waiting over
four scrapes that fell as a lockstep batch arrived). The samples left out are counted, so a
test can insist that most are kept.

:func:`gauge_agreement` gives per step stage both means, the number of samples and the relative
difference; the tests hold the difference within 10 % on the simulator and on llama-server.
One endpoint only: with several replicas the client cannot tell which served a request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.inputs.load import Run, read_run
from analysis.inputs.server_metrics import canonical_timeline
from analysis.stages.client_queue import (
    QueueRows,
    ServiceSpans,
    service_spans,
    single_user_ttft_ms,
    stage_positions,
)
from analysis.stages.summary import measured_requests, stage_windows, summarize_stages

#: at least this many gauge samples in a window before its mean is compared
MIN_SAMPLES = 3
#: a sample counts when the gauge's running + waiting are within this share of the client's
#: requests in flight at that instant (rounded down: below 10 in flight, exactly; one request in
#: transit at 4 in flight read 3 on the gauge and 4 at the client, a 25 % gap from the sample alone)
ACCOUNTED_SHARE = 0.10


@dataclass(frozen=True)
class StageAgreement:
    """One stage: the gauge's mean over its samples in the window and the client's count at
    the same instants."""

    stage: int
    target_users: int
    samples: int  # compared: the server's counts accounted for the client's requests
    in_transit: int  # left out: requests in flight at the client missing from both counts
    admitting: int  # left out: requests waiting beside a free slot (being admitted)
    gauge: float
    client: float

    @property
    def relative(self) -> float:
        """|client − gauge| / gauge (NaN when the gauge read 0)."""
        return abs(self.client - self.gauge) / self.gauge if self.gauge > 0 else math.nan

    def within(self, share: float) -> bool:
        """The two agree within ``share`` of the gauge, or differ by no more than one request on
        one sample: the finest difference the samples can show (a simulator's gauge counts a
        request that arrived between two engine steps as waiting for that step; at 2 users, one
        such scrape in four read 1.75 against 2.0, a 12.5 % gap from one sample alone)."""
        return abs(self.client - self.gauge) * self.samples <= max(
            share * self.gauge * self.samples, 1.0
        )


def _open_at(begins: np.ndarray, ends: np.ndarray, times: np.ndarray) -> np.ndarray:
    """At each of ``times``, how many ``[begin, end)`` hold it: those begun by then less those
    ended by then (a begin past its end counts as its end: such a span holds no instant), by
    two sorted searches instead of a times × spans table."""
    known = ~np.isnan(begins) & ~np.isnan(ends)
    ends = ends[known]
    begun = np.sort(np.minimum(begins[known], ends))
    t = np.asarray(times, dtype=float)
    counts = np.searchsorted(begun, t, side="right") - np.searchsorted(np.sort(ends), t, "right")
    return counts.astype(np.int64)


def running_at(spans: ServiceSpans, times: np.ndarray) -> np.ndarray:
    """The client's count of requests in service at each instant of ``times`` (unix s): the
    same spans as ``client_running``, read where the server's gauge was sampled, so the two can
    be compared sample for sample (a gauge's mean over a few scrapes is itself a sample)."""
    return _open_at(spans.served_from, spans.ends, times)


def in_flight_at(q: QueueRows, times: np.ndarray) -> np.ndarray:
    """The client's requests outstanding (sent, not yet ended; every judged outcome) at each
    instant of ``times``."""
    return _open_at(q.starts[q.judged], q.ends[q.judged], times)


def gauge_agreement(run: Run, summary: pd.DataFrame) -> list[StageAgreement]:
    """Per step or refine stage with at least :data:`MIN_SAMPLES` gauge samples in its window:
    the server's running gauge and the client's estimate at the same instants. Empty without a
    running gauge, without TTFT, or with more than one scraped endpoint."""
    if run.server_metrics.empty:
        return []
    timeline = canonical_timeline(run.server_metrics)
    timeline = timeline[timeline["requests_running"].notna()]
    waiting = timeline["requests_waiting"].fillna(0.0)
    slots_seen = float(timeline["requests_running"].max())  # the most it ever ran at once
    t1 = single_user_ttft_ms(summary)
    if timeline.empty or timeline["endpoint"].nunique() != 1 or t1 is None:
        return []
    if "ttft_ms" not in run.requests:
        return []
    windows = stage_windows(run, measured_requests(run))
    kinds = run.stages.set_index("stage")
    every, positions = QueueRows.of(run.requests), stage_positions(run.requests)
    out = []
    for stage, start, end in zip(
        windows.index, windows["window_start"], windows["window_end"], strict=True
    ):
        if kinds.at[stage, "kind"] == "baseline" or stage not in positions:
            continue
        rows = every.take(positions[stage])
        spans = service_spans(rows, t1)
        stamps = timeline["timestamp_unix_s"]
        inside = timeline[(stamps >= start) & (stamps <= end)]
        if spans is None or len(inside) < MIN_SAMPLES:
            continue
        times = inside["timestamp_unix_s"].to_numpy(dtype=float)
        client = running_at(spans, times)
        in_flight = in_flight_at(rows, times)
        books = inside["requests_running"].to_numpy(dtype=float) + waiting[inside.index].to_numpy()
        accounted = np.abs(books - in_flight) <= np.floor(ACCOUNTED_SHARE * in_flight)
        # waiting beside a free slot is an admission in progress (the next engine step, a
        # prefill budget), not a wait for a slot: the client sees it as its prefill
        running = inside["requests_running"].to_numpy(dtype=float)
        admitting = (waiting[inside.index].to_numpy() > 0) & (running < slots_seen)
        keep = accounted & ~admitting
        if keep.sum() < MIN_SAMPLES:
            continue
        out.append(
            StageAgreement(
                int(stage),
                int(kinds["target_users"].astype(int)[stage]),
                int(keep.sum()),
                int((~accounted).sum()),
                int((accounted & admitting).sum()),
                float(inside["requests_running"].to_numpy(dtype=float)[keep].mean()),
                float(client[keep].mean()),
            )
        )
    return out


def assert_gauge_agreement(run_dir: Path, *, min_stages: int = 4, within: float = 0.10) -> None:
    """The e2e tests' check on one run directory: at least ``min_stages`` stages compared, at most
    a quarter of the gauge's samples left out as in transit, every stage within ``within``."""
    run = read_run(run_dir)
    agreement = gauge_agreement(run, summarize_stages(run))
    assert len(agreement) >= min_stages, agreement
    kept, left = sum(a.samples for a in agreement), sum(a.in_transit for a in agreement)
    assert left <= 0.25 * (kept + left), agreement
    assert all(a.within(within) for a in agreement), agreement
