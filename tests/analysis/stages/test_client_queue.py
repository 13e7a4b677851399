"""Queueing seen from the client (analysis/client_queue, client_signals, knee_fit), on rows of a
closed loop simulated exactly here: ``users`` clients, ``slots`` servers, FIFO, fixed service."""

from __future__ import annotations

import heapq

import numpy as np
import pandas as pd
import pytest

from analysis.advice.facts import DeployFact, KneeWhyFact
from analysis.knee.client_signals import starved
from analysis.knee.facts import (
    ClientQueueFact,
    GaugeCheckFact,
    InFlightFact,
    KneeSummaryFact,
    ServerQueueFact,
)
from analysis.knee.find import KneeParams, find_knee
from analysis.knee.fit import Levels, whole
from analysis.model import Signal
from analysis.stages.baseline import compute_baseline
from analysis.stages.client_queue import QueueRows, ServiceSpans, stage_queue
from tests.analysis.stages.gauge_agreement import in_flight_at, running_at
from tests.support.knee_frames import sweep

T1_MS, ITL_MS, TOKENS = 20.0, 10.0, 60  # prefill, step, output tokens: service ≈ 0.61 s


def closed_loop(users: int, slots: int, seconds: float = 30.0, gap_s: float = 0.0) -> pd.DataFrame:
    """Rows of a closed loop: each user sends its next request ``gap_s`` after the last ended;
    a request waits FIFO for one of ``slots``, then takes T1 + TOKENS × ITL (± 5 %, seeded:
    real requests drift out of step), the client adding 0–4 ms before the server sees it."""
    rng = np.random.default_rng(users * 100 + slots)
    mean_service = (T1_MS + TOKENS * ITL_MS) / 1000.0
    free = [0.0] * slots  # when each slot frees
    heapq.heapify(free)
    arrivals = [(u * 0.013, u) for u in range(users)]  # staggered starts
    heapq.heapify(arrivals)
    rows = []
    while arrivals:
        start, user = heapq.heappop(arrivals)
        if start > seconds:
            continue
        slot_free = heapq.heappop(free)
        begin = max(start + rng.uniform(0, 0.004), slot_free)
        end = begin + mean_service * rng.uniform(0.95, 1.05)
        heapq.heappush(free, end)
        rows.append(
            {"stage": 1, "phase": "measure", "outcome": "ok", "length_ok": 1,
             "start_unix_s": start, "end_unix_s": end, "e2e_ms": (end - start) * 1000,
             "ttft_ms": (begin - start) * 1000 + T1_MS, "itl_p50_ms": ITL_MS}
        )  # fmt: skip
        heapq.heappush(arrivals, (end + gap_s, user))
    return pd.DataFrame(rows)


@pytest.mark.parametrize(("users", "slots"), [(4, 8), (8, 8), (9, 8), (12, 8), (16, 8), (20, 12)])
def test_the_running_and_waiting_counts_come_from_ttft_and_e2e(users, slots):
    q = stage_queue(closed_loop(users, slots), 5.0, 25.0, T1_MS)
    assert q is not None
    assert q.running == pytest.approx(min(users, slots), rel=0.03)
    assert q.waiting == pytest.approx(max(0, users - slots), abs=0.05 * users)
    assert q.in_flight == pytest.approx(users, rel=0.02)
    assert q.running_low <= q.running <= q.running_high  # 10 windows of 2 s: an interval
    if users > slots:
        assert q.wait_share_pct > 0 and q.wait_ms > 0.25 * 610
    else:
        assert q.wait_share_pct == 0


def test_a_client_that_leaves_gaps_is_flagged_as_starved():
    q = stage_queue(closed_loop(8, 16, gap_s=0.3), 5.0, 25.0, T1_MS)
    assert q is not None and q.in_flight < 0.9 * 8
    row = pd.Series({"client_in_flight": q.in_flight, "target_users": 8, "batch_size": 1})
    signal = starved(row)
    fact = signal.fact  # fewer in flight than the users would keep: the client starved
    assert signal.fired and isinstance(fact, InFlightFact) and fact.kind == "in_flight"
    assert fact.share < fact.threshold_share and fact.in_flight == q.in_flight
    fine = stage_queue(closed_loop(8, 16), 5.0, 25.0, T1_MS)
    assert fine is not None
    assert not starved(row.copy().replace({q.in_flight: fine.in_flight})).fired


def _table(slots: int, levels: list[int], hide: bool = True, **extra: list[float]):
    """A record table of the exact closed loop at each level, with the client columns."""
    rate = TOKENS / ((T1_MS + TOKENS * ITL_MS) / 1000.0)  # one user's tok/s
    cols: dict[str, list[float]] = {k: [] for k in ("client_running", "client_waiting")}
    tok, p95 = [], []
    for users in levels:
        q = stage_queue(closed_loop(users, slots), 5.0, 25.0, T1_MS)
        assert q is not None
        cols["client_running"].append(q.running)
        cols["client_waiting"].append(q.waiting)
        tok.append(rate * min(users, slots))
        p95.append(610.0 * (1 + max(0, users - slots) / slots) * 1.02)
    if not hide:
        cols["running_mean"] = [float(min(u, slots)) for u in levels]
        cols["running_max"] = cols["running_mean"]
        cols["waiting_mean"] = [float(max(0, u - slots)) for u in levels]
    return sweep(levels, tok, p95, baseline_tok_s=rate, baseline_p95_ms=620.0, **cols, **extra)


@pytest.mark.parametrize("hide", [True, False])
def test_the_client_side_queue_makes_the_knee_where_the_tail_is_a_coin_toss(hide):
    """One user past 8 slots: the tail is ~1.1× (never 'departed') and 8 → 10 still gains; the
    requests that waited a service time say the server runs 8 at once."""
    summary = _table(8, [2, 4, 8, 10, 12], hide=hide)
    result = find_knee(summary, compute_baseline(None, summary))
    assert (result.knee_users, result.max_concurrency) == (10, 8)
    knee = next(v for v in result.stages if v.target_users == 10)
    first = knee.reasons[0]  # the queue that made the knee, seen by the client or the server
    assert isinstance(first, Signal) and first.fired, knee.reasons
    if hide:
        assert isinstance(first.fact, ClientQueueFact) and round(first.fact.running) == 8
        assert result.client_slots == 8
        assert isinstance(result.summary, KneeSummaryFact) and result.summary.client_slots == 8
    else:
        assert isinstance(first.fact, ServerQueueFact) and first.fact.kind == "server_saturated"
        assert first.fact.running_mean == 8.0


def test_the_client_estimate_bounds_max_concurrency_between_grid_levels():
    summary = _table(12, [1, 2, 4, 8, 16, 24])
    result = find_knee(summary, compute_baseline(None, summary))
    assert result.knee_users == 16 and result.max_concurrency == 8  # the grid's stage before
    summary = _table(12, [1, 2, 4, 8, 16, 24])
    summary.loc[summary["target_users"] == 16, "client_waiting"] = 0.0  # as if 16 held
    result = find_knee(summary, compute_baseline(None, summary))
    assert result.max_concurrency == 12  # 24 queued behind ~12 running: at most 12


def test_a_disagreement_with_the_servers_gauge_is_said():
    summary = _table(8, [2, 4, 8, 10, 12], hide=False)
    summary.loc[summary["target_users"] == 12, "client_running"] = 6.0
    result = find_knee(summary, compute_baseline(None, summary))
    stage = next(v for v in result.stages if v.target_users == 12)
    said = [r for r in stage.reasons if isinstance(r, GaugeCheckFact)]
    assert [(r.estimate, r.gauge, r.running_off) for r in said] == [(6.0, 8.0, True)], said


def test_the_fit_over_all_stages_carries_an_interval_that_covers_the_slots():
    rng = np.random.default_rng(3)
    levels = [1, 2, 4, 6, 8, 9, 10, 12, 16, 24]
    x1 = 94.0
    tok = [x1 * min(c, 8) * (1 - 0.025 * min(c, 8)) for c in levels]  # concave rise, plateau
    tok = [t * (1 + rng.normal(0, 0.01)) for t in tok]
    summary = sweep(
        levels, tok, [600.0] * len(levels), baseline_tok_s=x1, baseline_p95_ms=600.0,
        output_tok_s_hw_pct=[2.0] * len(levels), interval_batches=[10.0] * len(levels),
    )  # fmt: skip
    fit = Levels(summary, "output_tok_s").fit(summary["output_tok_s"].to_numpy(), x1)
    assert fit is not None and fit.flat
    assert fit.low <= 8 <= fit.high + 0.5 and fit.high - fit.low < 2
    assert whole(fit.capacity) == 8
    result = find_knee(summary, compute_baseline(None, summary), params=KneeParams())
    assert result.capacity is not None and abs(result.capacity - 8) < 1
    # no plateau: throughput still grows at every level
    growing = sweep(
        levels, [x1 * c * 0.9 for c in levels], [600.0] * len(levels), baseline_tok_s=x1,
        baseline_p95_ms=600.0,
    )  # fmt: skip
    fit = Levels(growing, "output_tok_s").fit(growing["output_tok_s"].to_numpy(), x1)
    assert fit is not None and not fit.flat and fit.plateau_high >= fit.flat_gain_ratio


def test_flat_gpu_memory_without_a_kv_gauge_is_a_pre_allocated_pool_not_pressure():
    """vLLM behind a gateway, NVML on the host: GPU memory sits at 90 % from the first stage (its
    pre-allocated KV pool) and no KV gauge says how full the pool is. Read as pressure, every
    stage was unsafe and the answer to deploy was 'no tested concurrency is safe'."""
    summary = _table(8, [2, 4, 8, 10, 12], gpu_mem_peak_pct=[90.0] * 5)
    knee, answer = _deploy(summary)
    assert knee.max_concurrency == 8 and answer.users == 8 and answer.bound == "knee"
    # the knee's why is the client-side queue: requests waited while the server ran all it would
    assert isinstance(answer.fact, DeployFact) and isinstance(answer.fact.why, KneeWhyFact)
    assert answer.fact.why.queue == "client"
    # memory that grows with the load is still read
    summary = _table(8, [2, 4, 8, 10, 12], gpu_mem_peak_pct=[40.0, 55.0, 80.0, 88.0, 90.0])
    _, answer = _deploy(summary)
    assert answer.users == 8 and isinstance(answer.fact, DeployFact)
    assert "memory" in answer.fact.bounds


def _deploy(summary):
    from analysis.advice.deploy import deploy_answer

    knee = find_knee(summary, compute_baseline(None, summary))
    return knee, deploy_answer(summary, knee)


def test_a_stage_with_failures_is_not_called_starved_for_its_back_off():
    row = pd.Series({"client_in_flight": 4.0, "target_users": 8, "batch_size": 1, "errors": 3})
    assert not starved(row).fired
    assert starved(row.drop("errors")).fired


def test_the_counts_at_instants_are_the_spans_that_hold_them():
    """running_at / in_flight_at count by two sorted searches; the definition is the table of
    instants × spans: a span [begin, end) holds t when begin <= t < end. Instants on the spans'
    own edges, a begin past its end (no instant) and unknown times (none) included."""
    rng = np.random.default_rng(7)
    n = 400
    starts = np.round(rng.uniform(0.0, 20.0, n), 1)  # coarse: many shared edges
    ends = starts + np.round(rng.uniform(0.0, 3.0, n), 1)
    served = np.minimum(starts + np.round(rng.uniform(0.0, 1.0, n), 1), ends)
    served[::37] = ends[::37] + 0.1  # a begin past its end
    ends[5], starts[11], served[13] = np.nan, np.nan, np.nan
    outcome = np.where(rng.uniform(size=n) < 0.1, "cancelled", "ok")
    times = np.concatenate([np.arange(-1.0, 24.0, 0.1), starts[:50], ends[:50], served[:50]])
    times = times[~np.isnan(times)]

    def table(begins: np.ndarray, stops: np.ndarray) -> np.ndarray:
        t = times[:, None]
        return ((begins[None, :] <= t) & (t < stops[None, :])).sum(axis=1)

    none = np.zeros(n, dtype=bool)
    spans = ServiceSpans(none, starts, served, ends, none, none.astype(float))
    assert np.array_equal(running_at(spans, times), table(served, ends))
    rows = pd.DataFrame({"outcome": outcome, "start_unix_s": starts, "end_unix_s": ends,
                         "ttft_ms": 1.0, "e2e_ms": 1.0})  # fmt: skip
    judged = outcome != "cancelled"
    assert np.array_equal(
        in_flight_at(QueueRows.of(rows), times), table(starts[judged], ends[judged])
    )
    assert table(served, ends).max() > 5  # the instants do catch overlapping spans
