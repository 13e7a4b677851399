"""Per-request timing metrics, with numpy as the percentile oracle."""

from __future__ import annotations

import numpy as np
import pytest

from loadknee_locust.client.timing import percentile, request_timing


@pytest.mark.parametrize(
    "values",
    [[1.0], [1.0, 2.0], [3.0, 1.0, 2.0, 10.0], list(np.random.default_rng(1).exponential(5, 57))],
)
@pytest.mark.parametrize("q", [0, 50, 95, 99, 100])
def test_percentile_matches_numpy_linear(values: list[float], q: float) -> None:
    assert percentile(sorted(values), q) == pytest.approx(np.percentile(values, q))


def test_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)


def test_stream_metrics_from_stamps() -> None:
    # start 0; content at 0.100, 0.110, 0.130, 0.160; end 0.170; 4 tokens
    t = request_timing(0.0, 0.170, [0.100, 0.110, 0.130, 0.160], completion_tokens=4)
    assert t.e2e_ms == pytest.approx(170)
    assert t.ttft_ms == pytest.approx(100)
    assert t.tpot_ms == pytest.approx((170 - 100) / 3)
    gaps = [10, 20, 30]
    assert t.itl_mean_ms == pytest.approx(np.mean(gaps))
    assert t.itl_p50_ms == pytest.approx(np.percentile(gaps, 50))
    assert t.itl_p95_ms == pytest.approx(np.percentile(gaps, 95))
    assert t.itl_max_ms == pytest.approx(30)


@pytest.mark.parametrize(
    ("times", "tokens", "sequences", "ttft", "tpot", "itl"),
    [
        ([], 5, 1, None, None, None),  # not streamed / no content: only e2e
        ([0.05], 1, 1, 50.0, None, None),  # one token: no TPOT, no ITL
        ([0.05], None, 1, 50.0, None, None),  # tokens unknown: no TPOT
        ([0.05, 0.06], 2, 1, 50.0, 50.0, 10.0),
        ([0.05, 0.06], 8, 4, 50.0, 50.0, 10.0),  # batch: 2 tokens per sequence
        ([0.05, 0.06], 4, 4, 50.0, None, 10.0),  # batch: 1 token per sequence
    ],
)
def test_missing_inputs_give_none(
    times: list[float], tokens: int | None, sequences: int, ttft, tpot, itl
) -> None:
    t = request_timing(0.0, 0.1, times, completion_tokens=tokens, sequences=sequences)
    assert t.e2e_ms == pytest.approx(100)
    assert t.ttft_ms == (pytest.approx(ttft) if ttft is not None else None)
    assert t.tpot_ms == (pytest.approx(tpot) if tpot is not None else None)
    assert t.itl_p50_ms == (pytest.approx(itl) if itl is not None else None)
