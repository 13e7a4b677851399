"""The client's running estimate read at the gauge's sample instants (gauge_agreement.py here).

A closed loop simulated exactly here (users, FIFO slots, fixed service ± 5 %) gives the client's
rows and, at each scrape instant, the server's own running and waiting counts: the two agree
sample for sample; a gauge that splits the same requests two fewer running, two more waiting,
is found 10 % or more off; a scrape that lands
while a request is in transit (in neither of the server's counts) is left out and counted.
"""

from __future__ import annotations

import heapq
from pathlib import Path

import numpy as np
import pytest

from analysis.inputs.load import read_run
from analysis.stages.summary import summarize_stages
from tests.analysis.stages.gauge_agreement import StageAgreement, gauge_agreement
from tests.support.knee_rundir import request_row, stage_row, write_run

T1_MS, SERVICE_S = 20.0, 0.62
ENDPOINT = "http://127.0.0.1:1/metrics"


def _loop(stage: int, users: int, slots: int, t0: float, seconds: float, seed: int):
    """(rows, server spans): each request's client row and its (arrival, begin, end) at the
    server; the client reads the end 2 ms after the server finishes."""
    rng = np.random.default_rng(seed)
    free = [t0] * slots
    arrivals = [(t0 + u * 0.013, u) for u in range(users)]
    heapq.heapify(arrivals)
    rows, spans = [], []
    while arrivals:
        start, user = heapq.heappop(arrivals)
        if start > t0 + seconds:
            continue
        arrive = start + 0.001
        begin = max(arrive, heapq.heappop(free))
        end = begin + SERVICE_S * rng.uniform(0.95, 1.05)
        heapq.heappush(free, end)
        seen_end = end + 0.002
        phase = "warmup" if start < t0 + 1.0 else "measure"
        if stage == 0:
            phase = "baseline"
        ttft = (begin - start) * 1000 + T1_MS
        rows.append(
            request_row(len(rows) + stage * 10_000, stage, start, (seen_end - start) * 1000,
                        phase=phase, ttft_ms=ttft, itl_p50_ms=10.0, user_id=user)
        )  # fmt: skip
        spans.append((arrive, begin, seen_end - 0.002))
        heapq.heappush(arrivals, (seen_end, user))
    return rows, spans


def _scrapes(spans, times, *, running_offset: float = 0.0, gap_at: float | None = None):
    out = []
    for t in times:
        running = sum(b <= t < e for _, b, e in spans) + running_offset
        waiting = sum(a <= t < b for a, b, _ in spans) - running_offset
        if gap_at is not None and abs(t - gap_at) < 1e-9:
            running, waiting = 0, 0  # every request in transit: in neither count
        for name, value in (("vllm:num_requests_running", running),
                            ("vllm:num_requests_waiting", waiting)):  # fmt: skip
            out.append({"timestamp_unix_s": t, "endpoint": ENDPOINT, "metric": name,
                        "labels": "", "value": value})  # fmt: skip
    return out


def _run(tmp_path: Path, **scrape_kw):
    t0 = 1_700_000_000.0
    base_rows, _ = _loop(0, 1, 8, t0, 5.0, 1)
    step_rows, step_spans = _loop(1, 12, 8, t0 + 10.0, 11.0, 2)
    stages = [stage_row(0, 1, t0, kind="baseline", warmup_s=0.0, measure_s=5.0),
              stage_row(1, 12, t0 + 10.0, warmup_s=1.0, measure_s=10.0)]  # fmt: skip
    times = np.arange(t0 + 11.05, t0 + 21.0, 0.5)
    metrics = _scrapes(step_spans, times, **scrape_kw)
    run = read_run(
        write_run(tmp_path / "run", stages=stages, requests=base_rows + step_rows,
                  server_metrics=metrics)
    )  # fmt: skip
    return gauge_agreement(run, summarize_stages(run)), times


def test_the_client_count_matches_the_gauge_at_its_own_instants(tmp_path):
    (stage,), times = _run(tmp_path)
    assert (stage.target_users, stage.samples, stage.in_transit) == (12, len(times), 0)
    assert stage.gauge == pytest.approx(8.0, abs=0.01)
    assert stage.relative <= 0.02, stage


def test_a_gauge_that_splits_them_otherwise_is_found_off(tmp_path):
    (stage,), _ = _run(tmp_path, running_offset=-2.0)
    assert stage.relative > 0.10, stage


def test_a_scrape_in_transit_is_left_out_and_counted(tmp_path):
    t0 = 1_700_000_000.0
    (stage,), times = _run(tmp_path, gap_at=float(np.arange(t0 + 11.05, t0 + 21.0, 0.5)[3]))
    assert (stage.samples, stage.in_transit) == (len(times) - 1, 1)
    assert stage.relative <= 0.02, stage


@pytest.mark.parametrize(
    ("samples", "gauge", "client", "agrees"),
    [
        (4, 1.75, 2.0, True),  # one request on one of four samples: the finest step they show
        (4, 1.5, 2.0, False),  # two such samples: a real gap (25 %)
        (20, 8.0, 8.7, True),  # 8.75 % of the gauge
        (20, 8.0, 9.0, False),  # 12.5 % over 20 samples: far more than one request on one
        (19, 4.0, 3.58, False),  # the TTFT reading on llama-server at 4 users
    ],
)
def test_agreement_is_ten_percent_or_one_request_on_one_sample(samples, gauge, client, agrees):
    stage = StageAgreement(1, 2, samples, 0, 0, gauge, client)
    assert stage.within(0.10) is agrees
