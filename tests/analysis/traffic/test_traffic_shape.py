"""The streamed traffic shape against numpy on the same records: in-flight, bins, CV, order."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.traffic.shape import LatencyModel, ShapeParams, dist, traffic_shape
from loadknee_core.traces import TraceRecord


def _records(starts: np.ndarray, durations: np.ndarray | None, out: int = 10) -> list:
    return [
        TraceRecord(i + 1, float(s), None if durations is None else float(d), 100, out)
        for i, (s, d) in enumerate(
            zip(starts, durations if durations is not None else starts, strict=True)
        )
    ]


def _oracle_inflight(starts: np.ndarray, ends: np.ndarray) -> tuple[int, float]:
    """Peak (at the starts: a request ending exactly then no longer counts) and time mean."""
    peak = max(int(np.sum((starts <= t) & (ends > t))) for t in starts)
    span = ends.max() - starts.min()
    return peak, float(np.sum(ends - starts) / span)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_inflight_peak_mean_and_bins_match_a_brute_force_count(seed: int) -> None:
    rng = np.random.default_rng(seed)
    starts = np.sort(rng.uniform(0, 300, 400))
    durations = rng.exponential(4.0, 400)
    shape = traffic_shape(_records(starts, durations), ShapeParams(bin_s=1.0))
    peak, mean = _oracle_inflight(starts, starts + durations)
    assert shape.inflight is not None and shape.inflight_source == "logged"
    assert shape.inflight.max == peak
    assert shape.inflight.mean == pytest.approx(mean, rel=1e-9)
    assert max(shape.inflight_max or ()) == peak
    # each bin's mean in flight is the overlap of the requests with it over its width
    ends = starts + durations
    for k in (0, 37, 150, 299):
        lo, hi = starts.min() + k, starts.min() + k + 1
        overlap = np.clip(np.minimum(ends, hi) - np.maximum(starts, lo), 0, None).sum()
        assert shape.inflight_mean is not None
        assert shape.inflight_mean[k] == pytest.approx(overlap, rel=1e-9)
    assert sum(shape.arrivals) == 400


def test_the_time_weighted_median_and_p95_of_a_known_curve() -> None:
    # 1 in flight for 10 s, then 3 in flight for 10 s (0..10: one long request; 10..20: three)
    records = [TraceRecord(1, 0.0, 20.0, 1, 1), TraceRecord(2, 10.0, 10.0, 1, 1),
               TraceRecord(3, 10.0, 10.0, 1, 1)]  # fmt: skip
    shape = traffic_shape(records)
    assert shape.inflight is not None
    assert (shape.inflight.p50, shape.inflight.p95, shape.inflight.max) == (1, 3, 3)
    assert shape.peak_at_s == 10.0 and shape.span_s == 20.0


@pytest.mark.parametrize("seed", [3, 4])
def test_burstiness_is_the_cv_of_the_gaps(seed: int) -> None:
    rng = np.random.default_rng(seed)
    starts = np.cumsum(rng.gamma(0.25, 4.0, 2000))  # shape 0.25: CV 2
    shape = traffic_shape(_records(starts, None))
    gaps = np.diff(starts)
    assert shape.interarrival_cv == pytest.approx(gaps.std(ddof=1) / gaps.mean(), rel=1e-9)
    assert shape.inflight is None and shape.without_duration == 2000
    assert shape.mean_rate_per_s == pytest.approx(1999 / (starts[-1] - starts[0]))


def test_bins_merge_in_pairs_to_stay_under_the_cap() -> None:
    starts = np.arange(0.0, 1000.0, 0.5)
    shape = traffic_shape(_records(starts, np.full(len(starts), 0.25)), ShapeParams(max_bins=64))
    assert len(shape.arrivals) <= 64 and shape.bin_s == 16.0
    assert sum(shape.arrivals) == len(starts)
    assert shape.arrivals[0] == 32  # 16 s of two starts a second
    assert shape.inflight_mean is not None and shape.inflight_mean[0] == pytest.approx(0.5)


def test_littles_law_fills_in_durations_from_a_latency_model() -> None:
    starts = np.arange(0.0, 100.0, 0.5)  # 2 requests/s
    model = LatencyModel(mean_s=3.0, source="test")
    shape = traffic_shape(_records(starts, None), ShapeParams(latency=model))
    assert shape.inflight_source == "latency" and shape.latency_source == "test"
    assert shape.inflight is not None
    assert shape.inflight.p50 == 6  # λ·W = 2/s × 3 s
    per_token = LatencyModel(mean_s=9.0, source="t", ttft_s=0.5, tpot_s=0.25)
    assert per_token.duration_s(10) == 3.0 and per_token.duration_s(None) == 9.0


def test_unordered_records_are_put_back_or_left_out_and_named() -> None:
    starts = [0.0, 10.0, 5.0, 100.0, 8.0, 101.0]  # line 3: 5 s early; line 5: behind 0, 5 and 10
    records = [TraceRecord(i + 1, s, 1.0, 10 * (i + 1), 1) for i, s in enumerate(starts)]
    shape = traffic_shape(records, ShapeParams(reorder_s=30.0))
    assert shape.order.unordered == 2 and shape.order.unordered_lines == (3, 5)
    assert shape.order.left_out == 1 and shape.order.left_out_lines == (5,)
    assert shape.requests == 5 and sum(shape.arrivals) == 5
    assert shape.input_tokens is not None and shape.input_tokens.count == 6  # lengths kept
    text = shape.order.text()
    assert "lines 3, 5" in text and "(lines 5)" in text
    assert shape.order.ahead_line == 4 and "line 4's" in text  # 100 s: the latest start then
    assert traffic_shape(records[:2]).order.text() == ""


def test_a_tally_gives_exact_percentiles() -> None:
    got = dist({1: 50, 2: 45, 10: 5})
    assert got is not None and (got.p50, got.p95, got.max, got.count) == (1, 2, 10, 100)
    assert dist({}) is None


@pytest.mark.parametrize("max_bins", [2, 4, 5, 64])
def test_no_in_flight_time_is_lost_when_a_long_request_makes_the_bins_merge(max_bins: int) -> None:
    records = [TraceRecord(1, 0.0, 20.0, 1, 1), TraceRecord(2, 3.0, 0.6, 1, 1),
               TraceRecord(3, 3.2, 7.0, 1, 1)]  # fmt: skip
    shape = traffic_shape(records, ShapeParams(bin_s=1.0, max_bins=max_bins))
    assert shape.inflight_mean is not None and len(shape.arrivals) <= max_bins
    assert sum(shape.inflight_mean) * shape.bin_s == pytest.approx(20.0 + 0.6 + 7.0)
    assert max(shape.inflight_max or ()) == 3 and sum(shape.arrivals) == 3


def test_one_wrong_future_time_does_not_push_the_rest_out() -> None:
    starts = [0.0, 1.0, 86_400.0 * 365, 2.0, 3.0, 4.0]  # line 3: a year ahead
    records = [TraceRecord(i + 1, s, 0.5, 1, 1) for i, s in enumerate(starts)]
    shape = traffic_shape(records)
    assert shape.requests == 6 and shape.order.left_out == 0  # later lines still placed
    assert shape.order.unordered_lines == (4,)  # the line after the jump is named
    assert shape.span_s > 86_400 * 364  # and the span shows the wrong time
