"""The open-loop schedules, pure: rates, arrival processes, log replay and the worker split."""

from __future__ import annotations

import itertools
import statistics

import pytest

from loadknee_locust.arrivals.plan import (
    LEAD_S,
    Arrival,
    OpenLoopPlan,
    cap_share,
    log_arrivals,
    parse_rates,
    rate_offsets,
    share,
    stage_seed,
)
from loadknee_locust.plugin.options import LlmOptions


def _cv(offsets: list[float]) -> float:
    gaps = [b - a for a, b in itertools.pairwise(offsets)]
    return statistics.pstdev(gaps) / statistics.fmean(gaps)


@pytest.mark.parametrize(
    ("text", "rates"), [("1,2,4,8", (1.0, 2.0, 4.0, 8.0)), (" 0.5, 3 ", (0.5, 3.0))]
)
def test_parse_rates(text: str, rates: tuple[float, ...]) -> None:
    assert parse_rates(text) == rates


@pytest.mark.parametrize("text", ["", "1,x", "0", "-1", "nan", "inf"])
def test_parse_rates_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="--llm-rates"):
        parse_rates(text)


@pytest.mark.parametrize(
    ("process", "burstiness", "cv"),
    [
        ("poisson", 1.0, 1.0),
        ("gamma", 0.25, 2.0),
        ("gamma", 0.5, 2**0.5),
        ("gamma", 1.0, 1.0),
        ("gamma", 4.0, 0.5),
        ("gamma", 16.0, 0.25),
    ],
)
@pytest.mark.parametrize("seed", [0, 7])
def test_interarrival_cv(process: str, burstiness: float, cv: float, seed: int) -> None:
    """Poisson: CV 1 ± 0.1; gamma of shape b: CV 1/sqrt(b) ± 10 %; the mean rate as asked."""
    rate, duration = 50.0, 100.0  # about 5000 arrivals
    offsets = rate_offsets(
        rate,
        duration,
        process,
        burstiness=burstiness,
        seed=stage_seed(seed, 2),  # type: ignore[arg-type]
    )
    assert abs(_cv(offsets) - cv) <= 0.1 * cv
    assert len(offsets) / (duration - LEAD_S) == pytest.approx(rate, rel=0.1)
    assert all(LEAD_S < t < duration for t in offsets)


def test_constant_gaps_from_the_lead() -> None:
    offsets = rate_offsets(4.0, 2.0, "constant", lead_s=0.5)
    assert offsets == pytest.approx([0.5, 0.75, 1.0, 1.25, 1.5, 1.75])


def test_seeded_and_per_stage() -> None:
    a = rate_offsets(5.0, 10.0, "poisson", seed=stage_seed(3, 1))
    assert a == rate_offsets(5.0, 10.0, "poisson", seed=stage_seed(3, 1))
    assert a != rate_offsets(5.0, 10.0, "poisson", seed=stage_seed(3, 2))


def test_log_arrivals_sorted_scaled_and_counted() -> None:
    records = [(100.0, 10, 5), (160.0, 20, 6), (130.0, 30, 7), (100.0, 40, None)]
    arrivals, unordered = log_arrivals(records, time_scale=60.0, lead_s=0.5)
    assert unordered == 2  # 130 after 160, 100 after 130
    assert [a.offset_s for a in arrivals] == pytest.approx([0.5, 0.5, 1.0, 1.5])
    assert [a.input_tokens for a in arrivals] == [10, 40, 30, 20]
    with pytest.raises(ValueError, match="time-scale"):
        log_arrivals(records, time_scale=0)
    assert log_arrivals([], time_scale=1.0) == ([], 0)


@pytest.mark.parametrize("workers", [1, 2, 3, 5])
def test_share_sends_each_arrival_once(workers: int) -> None:
    items = [Arrival(i / 10) for i in range(23)]
    parts = [share(items, k, workers) for k in range(workers)]
    assert sorted((a for p in parts for a in p), key=lambda a: a.offset_s) == items
    assert max(map(len, parts)) - min(map(len, parts)) <= 1


@pytest.mark.parametrize(("cap", "workers"), [(8, 1), (8, 2), (7, 3), (16, 5)])
def test_cap_share_adds_up(cap: int, workers: int) -> None:
    assert sum(cap_share(cap, k, workers) for k in range(workers)) == cap


def test_plan_from_options() -> None:
    plan = OpenLoopPlan.from_options(
        LlmOptions(rates="1,2", arrivals="gamma", burstiness=0.5, stage_seconds="10")
    )
    assert plan.rates == (1.0, 2.0) and not plan.replay and plan.stage_seconds == 10.0
    arrivals = plan.stage_arrivals(1, 10.0)
    assert arrivals and all(LEAD_S < a.offset_s < 10.0 for a in arrivals)
    replay = OpenLoopPlan.from_options(LlmOptions(arrival_log="x.jsonl", time_scale=60))
    assert replay.replay and replay.time_scale == 60


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (LlmOptions(), "needs --llm-rates or --llm-arrival-log"),
        (LlmOptions(rates="1", arrival_log="x"), "exclude each other"),
        (LlmOptions(rates="1", max_in_flight=0), "max-in-flight"),
        (LlmOptions(rates="1", burstiness=0), "burstiness"),
        (LlmOptions(arrival_log="x", time_scale=-1), "time-scale"),
        (LlmOptions(rates="1", stage_seconds="auto"), "timed"),
        (LlmOptions(rates="1", stage_requests="40"), "timed"),
    ],
)
def test_plan_refuses(options: LlmOptions, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OpenLoopPlan.from_options(options)
