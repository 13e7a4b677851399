"""The knee with intervals and the server's own word: signals that must clear the noise, stages
too noisy to judge, the running/waiting saturation rule and the knee's resampled confidence."""

from __future__ import annotations

from dataclasses import replace

import pytest

from analysis.knee.confidence import knee_confidence
from analysis.knee.find import KneeParams, find_knee
from analysis.stages.baseline import compute_baseline
from analysis.stages.intervals import StageBatches
from tests.support.knee_frames import sweep, twelve_slots


def _knee(summary, **params):
    return find_knee(summary, compute_baseline(None, summary), params=KneeParams(**params))


def _by_users(result):
    return {v.target_users: v for v in result.stages}


def _signal(verdict, name):
    return next(s for s in verdict.signals if s.name == name)


# baseline 100 tok/s, 200 ms; 8 → 16 users adds 80 tok/s = 0.10× per user (flat below 0.15)
LEVELS, TOK, P95 = [4, 8, 16], [400.0, 780.0, 860.0], [220.0, 260.0, 600.0]


@pytest.mark.parametrize(
    ("hw_pct", "knee_users", "why"),
    [
        (1.0, 16, "narrow: at most 0.11× is still below 0.15"),
        (8.0, None, "±8 % of 780 and 860: the gain could be 0.22× -> not flat"),
    ],
)
def test_flattening_fires_only_when_its_upper_bound_is_below_the_threshold(hw_pct, knee_users, why):
    summary = sweep(
        LEVELS, TOK, P95, baseline_tok_s=100.0, baseline_p95_ms=200.0,
        output_tok_s_hw_pct=[hw_pct] * 3, interval_batches=[10.0] * 3,
        e2e_p95_low_ms=[p * 0.98 for p in P95],
    )  # fmt: skip
    result = _knee(summary)
    assert result.knee_users == knee_users, why
    flat = _signal(_by_users(result)[16], "throughput_flattening")
    assert flat.value == pytest.approx(0.10)  # the point figure is still reported
    assert flat.fact.gain_upper_ratio > flat.fact.gain_ratio  # the bound that decided
    assert (flat.fact.gain_upper_ratio < 0.15) is (knee_users == 16)


def test_without_intervals_the_point_figures_decide():
    summary = sweep(LEVELS, TOK, P95, baseline_tok_s=100.0, baseline_p95_ms=200.0)
    assert _knee(summary).knee_users == 16
    summary = sweep(
        LEVELS, TOK, P95, baseline_tok_s=100.0, baseline_p95_ms=200.0,
        output_tok_s_hw_pct=[8.0] * 3, interval_batches=[10.0] * 3,
    )  # fmt: skip
    assert _knee(summary, noise_aware=False).knee_users == 16  # --knee-ignore-noise


def test_tail_departure_needs_its_lower_bound_above_the_threshold():
    summary = sweep(
        LEVELS, TOK, [220.0, 260.0, 440.0], baseline_tok_s=100.0, baseline_p95_ms=200.0,
        output_tok_s_hw_pct=[1.0] * 3, interval_batches=[10.0] * 3,
        e2e_p95_low_ms=[210.0, 250.0, 380.0],  # 2.2× by the point, 1.9× at the lower bound
    )  # fmt: skip
    result = _knee(summary)
    assert result.knee_users is None
    tail = _signal(_by_users(result)[16], "tail_departure")
    assert not tail.fired and tail.value == pytest.approx(2.2)
    assert tail.fact.lower_ratio == pytest.approx(1.9) and tail.fact.outcome == "undecided"


@pytest.mark.parametrize(
    ("p95", "low", "outcome", "lower"),
    [
        (380.0, 370.0, "held", 1.85),  # 1.9×: held, nothing to say
        (440.0, 380.0, "undecided", 1.9),  # 2.2× by the point, 1.9× at the lower bound
        (440.0, 420.0, "departed", 2.1),
        (400.0, 300.0, "undecided", 1.5),  # exactly at the limit by the point: undecided
    ],
)  # fmt: skip
def test_a_tail_past_the_limit_but_not_past_its_noise_says_it_cannot_tell(p95, low, outcome, lower):
    """Silence would read as "the tail held"; a CI llama-server run on busy cores had 16 users
    on 8 slots at P95 2.58× a noisy baseline's, and the stage's reasons said nothing of it."""
    summary = sweep(
        LEVELS, TOK, [220.0, 260.0, p95], baseline_tok_s=100.0, baseline_p95_ms=200.0,
        output_tok_s_hw_pct=[1.0] * 3, interval_batches=[10.0] * 3,
        e2e_p95_low_ms=[210.0, 250.0, low],
    )  # fmt: skip
    stage = _by_users(_knee(summary))[16]
    tail = _signal(stage, "tail_departure")
    assert tail.fired is (outcome == "departed")
    assert (tail.fact.outcome, tail.fact.ratio) == (outcome, pytest.approx(p95 / 200.0))
    assert tail.fact.lower_ratio == pytest.approx(lower) and tail.fact.threshold_ratio == 2.0
    assert (tail in stage.reasons) is (outcome != "held")  # said unless it held


def test_a_noisy_or_short_stage_says_so_and_how_long_it_would_need():
    summary = sweep(
        LEVELS, TOK, P95, baseline_tok_s=100.0, baseline_p95_ms=200.0,
        output_tok_s_hw_pct=[2.0, 18.0, float("nan")], interval_batches=[10.0, 10.0, 0.0],
        window_needed_s=[60.0, 777.0, 19.0], window_s=[60.0, 60.0, 2.0],
    )  # fmt: skip
    v = _by_users(_knee(summary))
    assert not v[4].noisy
    assert v[8].noisy
    noisy = _signal(v[8], "noisy")
    assert (noisy.fact.kind, noisy.fact.width_pct, noisy.fact.max_pct) == ("interval", 18.0, 10.0)
    assert (noisy.fact.window_needed_s, noisy.fact.target_pct) == (777.0, 5.0)
    assert noisy in v[8].reasons
    assert v[16].noisy
    short = _signal(v[16], "noisy")
    assert (short.fact.kind, short.fact.window_s) == ("window_too_short", 2.0)
    assert short in v[16].reasons
    assert [v.target_users for v in _knee(summary).stages if v.noisy] == [8, 16]


# llama-server with 8 slots on busy cores: 16 users served less than 8 (a dip by the client's
# figures), 32 users more; the server said 8 running and 8 waiting at 16 users
LLAMA = {"levels": [2, 4, 8, 16, 32], "tok": [150.0, 260.0, 420.0, 300.0, 500.0],
         "p95": [1100.0, 1900.0, 3300.0, 6900.0, 12000.0]}  # fmt: skip


def _llama(with_metrics: bool):
    metrics: dict[str, list[float]] = {}
    if with_metrics:
        metrics = {
            "running_mean": [2.0, 4.0, 7.9, 8.0, 8.0],
            "running_max": [2.0, 4.0, 8.0, 8.0, 8.0],
            "waiting_mean": [0.0, 0.0, 0.05, 8.0, 24.0],
        }
    return sweep(
        LLAMA["levels"], LLAMA["tok"], LLAMA["p95"], baseline_tok_s=97.0, baseline_p95_ms=690.0,
        **metrics,
    )  # fmt: skip


def test_the_servers_queue_makes_the_knee_and_bounds_max_concurrency():
    client_only = _knee(_llama(False))
    # 16 served less than 8 and 32 more than 16, but 8 → 32 bought 0.03× of one user's rate per
    # added user: the plateau held, 16 was no dip; the knee stays at 16, max_concurrency 8
    assert (client_only.knee_users, client_only.max_concurrency) == (16, 8)
    assert _by_users(client_only)[16].verdict == "knee"
    absent = [_signal(v, "server_saturated").fact.kind for v in client_only.stages]
    assert absent == ["no_server_queue"] * 5  # judged from the client side alone
    result = _knee(_llama(True))
    assert (result.knee_users, result.max_concurrency, result.server_slots) == (16, 8, 8)
    knee = _by_users(result)[16]
    assert knee.verdict == "knee"
    saturated = _signal(knee, "server_saturated")
    assert knee.reasons[0] == saturated
    fact = saturated.fact
    assert (fact.running_mean, fact.running_peak, fact.slots, fact.waiting_mean) == (8, 8, 8, 8)
    assert (fact.in_flight, fact.threshold_waiting, fact.running_share) == (16, 1.0, 0.9)
    assert _by_users(result)[8].verdict != "knee"  # 0.05 waiting is not a queue


def test_the_running_maximum_bounds_max_concurrency_between_grid_levels():
    # 12 slots: 16 users saturate it; the stage before the knee is 12, never above the slots
    summary = twelve_slots([800.0, 1150.0, 1160.0], [300.0, 700.0, 1000.0])
    result = _knee(summary)
    assert (result.knee_users, result.max_concurrency) == (16, 8)
    # with the knee at 24 (16 had no real queue) the stage before it is 16, above the server's
    # 12 slots: the running maximum caps max_concurrency at 12
    summary = twelve_slots(
        [800.0, 1150.0, 1160.0], [300.0, 320.0, 1000.0],
        running_mean=[8.0, 11.0, 12.0], waiting_mean=[0.0, 0.5, 12.0],
    )  # fmt: skip
    result = _knee(summary)
    assert (result.knee_users, result.max_concurrency) == (24, 12)


def _batches(stage: int, rate: float, spread: float, e2e: float) -> StageBatches:
    rates = tuple(rate * (1 + spread * (k - 4.5) / 4.5) for k in range(10))
    groups = tuple(tuple(e2e * (1 + 0.01 * j) for j in range(10)) for _ in range(10))
    return StageBatches(stage, 60.0, 10, 1.0, rates, groups, None, None, None)


def test_knee_confidence_is_high_on_clear_data_and_low_when_the_noise_hides_the_knee():
    summary = sweep(LEVELS, TOK, P95, baseline_tok_s=100.0, baseline_p95_ms=200.0)
    baseline = compute_baseline(None, summary)
    knee = find_knee(summary, baseline)
    assert knee.max_concurrency == 8
    e2e = dict(zip(summary["stage"], summary["e2e_p95_ms"], strict=True))
    tok = dict(zip(summary["stage"], summary["output_tok_s"], strict=True))
    clear = {s: _batches(s, tok[s], 0.01, e2e[s] / 1.09) for s in summary["stage"]}
    sure = knee_confidence(summary, baseline, knee, clear, resamples=100)
    assert sure.confidence_pct == 100.0
    noisy = {s: _batches(s, tok[s], 0.6, e2e[s] / 1.09) for s in summary["stage"]}
    unsure = knee_confidence(summary, baseline, knee, noisy, resamples=100)
    assert unsure.confidence_pct is not None and unsure.confidence_pct < 90.0
    again = knee_confidence(summary, baseline, knee, noisy, resamples=100)
    assert again.confidence == unsure.confidence  # seeded
    assert knee_confidence(summary, baseline, knee, {}).confidence_pct is None


def test_the_resamples_judge_a_flattening_within_its_noise_as_the_answer_does():
    """8 → 16 users adds 0.10× one user's rate per user: flat by the point, but its ±8 %
    throughput intervals allow 0.22×, so the answer holds no knee (16 not past it). The
    resamples move the stages' figures, not their precision: a resample that judged the point
    alone would find the knee at 16 every time, and the answer would read as the noise's
    pick (cannot tell) on a run whose stages were long enough. The bench's compute-bound
    simulator with a lognormal log, 30-s stages: 0 % of resamples agreed before."""
    summary = sweep(
        LEVELS, TOK, P95, baseline_tok_s=100.0, baseline_p95_ms=200.0,
        output_tok_s_hw_pct=[8.0] * 3, interval_batches=[10.0] * 3,
    )  # fmt: skip
    baseline = compute_baseline(None, summary)
    knee = find_knee(summary, baseline)
    assert knee.knee_users is None and knee.max_concurrency == 16
    e2e = dict(zip(summary["stage"], summary["e2e_p95_ms"], strict=True))
    tok = dict(zip(summary["stage"], summary["output_tok_s"], strict=True))
    tight = {s: _batches(s, tok[s], 0.01, e2e[s] / 1.09) for s in summary["stage"]}
    sure = knee_confidence(summary, baseline, knee, tight, resamples=50)
    assert sure.confidence_pct == 100.0, sure.confidence


def _too_short(stage: int) -> StageBatches:
    return StageBatches(stage, 1.5, 0, 0.3, (), (), None, None, None)


@pytest.mark.parametrize(
    ("short_users", "unresampled", "measured"),
    [
        ((), (), True),  # every stage has windows: the share is a measurement
        ((4,), (), True),  # a stage below the answer: the resamples measure the rest
        ((8,), (8,), False),  # the capacity's own stage held its figures in every resample
        ((16,), (16,), False),  # so did the knee stage
        ((8, 16), (8, 16), False),
    ],
)
def test_a_share_is_no_confidence_when_a_stage_setting_the_answer_had_no_windows(
    short_users, unresampled, measured
):
    summary = sweep(LEVELS, TOK, P95, baseline_tok_s=100.0, baseline_p95_ms=200.0)
    baseline = compute_baseline(None, summary)
    knee = find_knee(summary, baseline)
    assert (knee.max_concurrency, knee.knee_users) == (8, 16)
    users = dict(zip(summary["stage"], summary["target_users"], strict=True))
    e2e = dict(zip(summary["stage"], summary["e2e_p95_ms"], strict=True))
    tok = dict(zip(summary["stage"], summary["output_tok_s"], strict=True))
    batches = {
        s: _too_short(s) if users[s] in short_users else _batches(s, tok[s], 0.01, e2e[s] / 1.09)
        for s in summary["stage"]
    }
    result = knee_confidence(summary, baseline, knee, batches, resamples=50)
    fact = result.confidence
    assert fact.unresampled == unresampled and fact.measured is measured
    # the share is still counted (noise below can move the answer), never claimed where unmeasured
    assert fact.same_pct == 100.0
    assert result.confidence_pct == (100.0 if measured else None)


# the 40-slot simulator on 2 s windows (too short for any interval): 34 users served less than
# 32 by the client's figures, while the server said 34 running, 0 waiting; 48 queued 8 behind 40
SIM40 = {"levels": [32, 34, 36, 40, 48], "tok": [1177.0, 1124.0, 1223.0, 1261.0, 1268.0],
         "p95": [1755.0, 1841.0, 1893.0, 2030.0, 2842.0]}  # fmt: skip


def _sim40(running_48: float, waiting_48: float, hw_pct: float = float("nan")):
    n = len(SIM40["levels"])
    return sweep(
        SIM40["levels"], SIM40["tok"], SIM40["p95"], baseline_tok_s=94.1, baseline_p95_ms=678.0,
        running_mean=[32.0, 34.0, 36.0, 40.0, running_48],
        running_max=[32.0, 34.0, 36.0, 40.0, running_48],
        waiting_mean=[0.0, 0.0, 0.0, 0.0, waiting_48],
        output_tok_s_hw_pct=[hw_pct] * n, interval_batches=[0.0 if hw_pct != hw_pct else 10.0] * n,
        window_s=[2.0] * n, window_needed_s=[10.0] * n,
    )  # fmt: skip


def test_an_untrusted_flattening_with_free_slots_yields_to_the_servers_word():
    result = _knee(_sim40(40.0, 8.0))
    v = _by_users(result)
    assert v[34].verdict == "critical"  # flat by a 2 s point figure, but 34 of 40 slots, 0 waiting
    free = _signal(v[34], "server_free_slots")
    assert free.fact.overrules_client and v[34].reasons[0] == free
    assert (free.fact.running_mean, free.fact.slots, free.fact.waiting_mean) == (34, 40, 0)
    assert v[40].verdict == "critical"  # 40 in flight on 40 slots: all admitted
    assert (result.knee_users, result.max_concurrency) == (48, 40)


def test_the_resamples_keep_each_stages_noise_as_the_answer_judged_it():
    """The answer 40 rests on 34's noisy flattening yielding to the server's free slots; every
    resample (its intervals cleared) must judge 34 as noisy too, or it answers by another rule."""
    summary = _sim40(40.0, 8.0)
    baseline = compute_baseline(None, summary)
    knee = find_knee(summary, baseline)
    assert knee.max_concurrency == 40 and _by_users(knee)[34].noisy
    e2e = dict(zip(summary["stage"], summary["e2e_p95_ms"], strict=True))
    tok = dict(zip(summary["stage"], summary["output_tok_s"], strict=True))
    tight = {s: _batches(s, tok[s], 0.01, e2e[s] / 1.09) for s in summary["stage"]}
    same = knee_confidence(summary, baseline, knee, tight, resamples=50)
    assert same.confidence_pct == 100.0, same.confidence
    # judged as if no stage were noisy, the resamples stop at 34: 32, whatever the server said
    plain = replace(knee, stages=tuple(replace(v, noisy=False) for v in knee.stages))
    other = knee_confidence(summary, baseline, plain, tight, resamples=50)
    assert other.confidence_pct == 0.0 and other.confidence.others == ((32, 100.0),)


def _sim40_hidden():
    """:func:`_sim40` with 48 running and none waiting, seen from the client alone."""
    n, users = len(SIM40["levels"]), [float(u) for u in SIM40["levels"]]
    return sweep(
        SIM40["levels"], SIM40["tok"], SIM40["p95"], baseline_tok_s=94.1, baseline_p95_ms=678.0,
        client_running=users, client_waiting=[0.0] * n, client_in_flight=users,
        output_tok_s_hw_pct=[float("nan")] * n, interval_batches=[0.0] * n,
        window_s=[2.0] * n, window_needed_s=[10.0] * n,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("summary", "overruled_by"),
    [
        (_sim40(48.0, 0.0), "server_free_slots"),
        (_sim40_hidden(), "client_unqueued"),
    ],
    ids=["server-gauges", "client-estimate"],
)
def test_with_no_queue_anywhere_a_noisy_flattening_is_no_knee_with_or_without_gauges(
    summary, overruled_by
):
    """No stage queued (48 running, none waiting): the 2 s point figures' dip at 34 (less than 32
    served, and 36 served more than either) is no knee whoever says nothing waited. Before, the
    server's word counted only once a queue proved its slots, so the same run answered 32 with
    its gauges and 48 without; a 40-slot simulator on a busy machine (3 s stages) was answered
    28 with its gauges, its 30 users' flattening (1,128 -> 1,141 tok/s) within the noise while
    the server said 30 running, 0 waiting."""
    result = _knee(summary)
    v = _by_users(result)
    assert v[34].verdict == "critical" and v[34].reasons[0].name == overruled_by
    assert {u: x.verdict for u, x in v.items()} == dict.fromkeys(SIM40["levels"], "critical")
    assert (result.knee_users, result.max_concurrency) == (None, 48)


def test_a_trusted_flattening_keeps_its_verdict_below_the_slots():
    # narrow intervals: a compute-bound bend below the slot count is still the knee
    summary = _sim40(40.0, 8.0, hw_pct=0.5)
    result = _knee(summary)
    assert _by_users(result)[34].verdict == "knee"
    assert result.max_concurrency == 32


# a compute-bound simulator (12 slots, prefill-heavy) on a fresh machine under a CPU hog: 8 users
# flat within a ±12.5 % interval (too wide: noisy), tail far past 2× at its low end, 7 of 12 slots
# running; 16 users queued behind 12 (a 7 s window: no interval)
COMPUTE_BOUND = {"levels": [4, 8, 16], "tok": [88.9, 103.7, 106.4], "p95": [845.0, 1533.0, 2601.0]}


@pytest.mark.parametrize(
    ("hw_pct", "p95_low", "verdict_8", "knee_users", "why"),
    [
        (12.5, 1316.0, "knee", 8, "flat at the gain's upper end, departed at the tail's low end"),
        (None, None, "critical", 16, "point figures only: the server's free slots overrule"),
        (12.5, 550.0, "critical", 16, "the tail's low end under 2×: the knee needs its noise"),
    ],
)
def test_a_noisy_knee_that_clears_its_noise_stands_beside_free_slots(
    hw_pct, p95_low, verdict_8, knee_users, why
):
    nan = float("nan")
    summary = sweep(
        COMPUTE_BOUND["levels"], COMPUTE_BOUND["tok"], COMPUTE_BOUND["p95"],
        baseline_tok_s=47.7, baseline_p95_ms=307.0,
        running_mean=[3.4, 7.0, 11.9], running_max=[4.0, 8.0, 12.0],
        waiting_mean=[0.57, 0.93, 4.14],
        output_tok_s_hw_pct=[4.0 if hw_pct else nan, hw_pct or nan, nan],
        interval_batches=[9.0 if hw_pct else 0.0, 9.0 if hw_pct else 0.0, 0.0],
        e2e_p95_low_ms=[800.0, p95_low or nan, nan],
        window_s=[7.0] * 3, window_needed_s=[9.0, 44.0, 9.0],
    )  # fmt: skip
    result = _knee(summary)
    v = _by_users(result)
    assert v[8].noisy, why
    assert (v[8].verdict, result.knee_users) == (verdict_8, knee_users), why
    assert result.max_concurrency == {8: 4, 16: 8}[knee_users], why


# the same simulator beside a suite and a CPU hog: 8 users' requests too long for five windows
# (no interval anywhere past 4), their medians from 44 requests each (order statistics)
MEDIANS = {"e2e_p50_ms": [713.0, 1257.0, 2349.0], "e2e_p50_low_ms": [712.1, 1255.9, 2302.0],
           "e2e_p50_high_ms": [713.4, 1258.7, 2351.5]}  # fmt: skip


def _compute_bound_point_figures(**columns: list[float]):
    nan = float("nan")
    return sweep(
        COMPUTE_BOUND["levels"], COMPUTE_BOUND["tok"], COMPUTE_BOUND["p95"],
        baseline_tok_s=47.7, baseline_p95_ms=307.0,
        running_mean=[3.4, 7.0, 11.9], running_max=[4.0, 8.0, 12.0],
        waiting_mean=[0.0, 0.0, 4.14], output_tok_s_hw_pct=[4.0, nan, nan],
        interval_batches=[9.0, 0.0, 0.0], window_s=[7.0] * 3, window_needed_s=[9.0, 9.0, 9.0],
        **{"client_in_flight": [4.0, 8.0, 16.0], **MEDIANS, **columns},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("columns", "knee_users", "latency", "why"),
    [
        (
            {},
            8,
            (0.058, 0.086),
            "users over their median e2e: 0.06× per added user, at most 0.09× (3 % on each "
            "rate), and the median itself 4.1× the single-user tail at its low end",
        ),
        (
            {"e2e_p50_low_ms": [712.1, 800.0, 2302.0]},
            16,
            (0.058, 0.373),
            "a median interval as wide as the noise: at most 0.37×, the server's word stands",
        ),
        (
            {"e2e_p50_ms": [713.0, 900.0, 2349.0], "e2e_p50_low_ms": [712.1, 898.0, 2302.0]},
            16,
            (0.252, 0.287),
            "the latency says the users were still served faster: no flattening",
        ),
        (
            {"client_in_flight": [3.0, 6.0, 12.0]},
            None,
            None,
            "a quarter of the users' time between requests: users over latency is not the rate",
        ),
    ],
    ids=["medians-flat", "medians-wide", "medians-growing", "think-time"],
)
def test_a_knee_on_point_figures_stands_where_the_latency_reads_the_same_gain(
    columns, knee_users, latency, why
):
    """#53: the point figures flattened at 8 users (0.08× one user's rate per added user) with
    the tail 5× the single-user one, but no interval: the server's free slots demoted the knee
    and the answer doubled (8 for the simulator's 4). Little's law reads the same gain from the
    latency, with an interval that needs no windows."""
    result = _knee(_compute_bound_point_figures(**columns))
    v = _by_users(result)
    assert v[8].noisy, why
    flat = _signal(v[8], "throughput_flattening")
    assert flat.fired and flat.fact.gain_upper_ratio is None, why  # the point figure, no interval
    got = (flat.fact.latency_gain_ratio, flat.fact.latency_gain_upper_ratio)
    if latency is None:
        assert got == (None, None), why
    else:
        assert got == pytest.approx(latency, abs=0.001), why
    assert v[8].verdict == ("knee" if knee_users == 8 else "critical"), why
    if knee_users == 16:
        assert v[8].reasons[0].name == "server_free_slots", why
    if knee_users is not None:  # (think time also moves the client's queue estimate at 16)
        assert result.knee_users == knee_users, why
        assert result.max_concurrency == {8: 4, 16: 8}[knee_users], why
    tail = _signal(v[8], "tail_departure").fact
    assert tail.median_lower_ratio == pytest.approx(
        float(_compute_bound_point_figures(**columns)["e2e_p50_low_ms"].iloc[2]) / 307.0
    )


def test_a_knife_edge_gain_read_by_the_latency_does_not_clear_the_noise():
    """The 40-slot simulator at 32 → 34 users (2 s windows, no interval): the fast preset's steps
    (10 + 0.5 ms × batch) give 0.1496× per added user, on the rule's edge; a median 1 % either way
    and 3 % on each rate make the latency's upper end 0.67×, so the server's free slots still
    decide (40)."""
    n = len(SIM40["levels"])
    step = [10.0 + 0.5 * u for u in SIM40["levels"]]
    medians = [678.0 * s / 10.5 for s in step]
    summary = _sim40(40.0, 8.0)
    summary["client_in_flight"] = [1.0] + [float(u) for u in SIM40["levels"]]
    summary["e2e_p50_ms"] = [678.0, *medians]
    summary["e2e_p50_low_ms"] = [671.0, *(m * 0.99 for m in medians)]
    summary["e2e_p50_high_ms"] = [685.0, *(m * 1.01 for m in medians)]
    result = _knee(summary)
    flat = _signal(_by_users(result)[34], "throughput_flattening").fact
    assert flat.latency_gain_ratio == pytest.approx(0.150, abs=0.001)
    assert flat.latency_gain_upper_ratio > 0.15
    assert (result.knee_users, result.max_concurrency) == (48, 40)
    assert len(summary) == n + 1


def test_requests_that_waited_for_a_step_not_a_slot_leave_the_slots_free():
    """ci95: the 40-slot simulator on a machine at load 6.6 on 2 cores (2 s stages, no interval),
    refined down from 48: 34 users flattened on the point figures (1,170 → 1,173 tok/s) with 2.5
    waiting on average beside 30.5 running, 9.5 of 40 slots free. Each arrival waited for the
    starved process's next step; read as a queue it kept the noisy knee and the answer was 32."""
    n = len(SIM40["levels"])
    summary = _sim40(40.0, 8.0)
    running = [1.0, 32.0, 30.5, 36.0, 40.0, 40.0]
    waiting = [0.0, 0.0, 2.5, 0.0, 0.0, 8.0]
    summary["running_mean"] = running
    summary["waiting_mean"] = waiting
    result = _knee(summary)
    v = _by_users(result)
    free = _signal(v[34], "server_free_slots")
    assert v[34].verdict == "critical" and v[34].reasons[0] == free
    assert free.fact.overrules_client and free.fact.waiting_mean == 2.5
    assert (result.knee_users, result.max_concurrency) == (48, 40)
    # the same 2.5 waiting with the slots full on average is a queue: the knee stands
    summary["running_mean"] = [1.0, 32.0, 39.0, 36.0, 40.0, 40.0]
    assert _by_users(_knee(summary))[34].verdict == "knee"
    assert len(summary) == n + 1


def test_a_queue_with_the_running_gauge_dipping_between_batches_is_saturation():
    # the 10-slot simulator on 2 s windows: lockstep batches pull the running mean to 6.0 while
    # it peaked at 10 and 2 requests waited on average; 12 is past the slots, whatever 8 → 12 gained
    summary = sweep(
        [8, 12, 16], [554.0, 642.0, 644.0], [1300.0, 1930.0, 1960.0],
        baseline_tok_s=94.4, baseline_p95_ms=678.0,
        running_mean=[8.0, 6.0, 8.0], running_max=[8.0, 10.0, 10.0],
        waiting_mean=[0.0, 2.0, 6.0],
    )  # fmt: skip
    result = _knee(summary)
    assert _by_users(result)[12].verdict == "knee"
    assert (result.knee_users, result.max_concurrency, result.server_slots) == (12, 8, 10)


#: the KV-bound simulator with a lognormal length mix (its gauges): short requests let it run 13
#: at once, on average it ran 10.4-11.2; at 12 users 1.6 waited with the KV cache at 90 %
KV_MIX = {
    "levels": [4, 8, 12, 16],
    "tok": [322.0, 543.0, 639.0, 681.0],
    "p95": [1460.0, 1850.0, 2680.0, 2630.0],
    "running_mean": [3.89, 7.94, 10.39, 11.17],
    "running_max": [4.0, 8.0, 12.0, 13.0],
    "waiting_mean": [0.11, 0.06, 1.61, 4.83],
}


@pytest.mark.parametrize(
    ("kv_12", "waiting_12", "most", "knee_users", "capacity", "why"),
    [
        (89.7, 1.61, 13.0, 12, 8, "KV full: fewer fit than the most it ran, and 1.6 waited"),
        (60.0, 1.61, 13.0, 16, 12, "KV not full: 12 below its most (13) is between steps"),
        (None, 1.61, 13.0, 16, 12, "no KV gauge: the same"),
        (89.7, 0.6, 13.0, 16, 12, "KV full but under a request waiting on average"),
        (89.7, 1.61, 12.0, 16, 12, "KV full at exactly the most it ran: between steps"),
    ],
)
def test_a_full_kv_cache_makes_a_queue_below_the_most_it_ran_saturation(
    kv_12, waiting_12, most, knee_users, capacity, why
):
    waiting = [0.11, 0.06, waiting_12, 4.83]
    kv = [35.9, 89.2, kv_12, 89.7] if kv_12 is not None else None
    extra = {} if kv is None else {"kv_cache_peak_pct": kv}
    summary = sweep(
        KV_MIX["levels"], KV_MIX["tok"], KV_MIX["p95"],
        baseline_tok_s=92.8, baseline_p95_ms=1470.0,
        running_mean=KV_MIX["running_mean"], running_max=[*KV_MIX["running_max"][:3], most],
        waiting_mean=waiting, **extra,
    )  # fmt: skip
    result = _knee(summary)
    twelve = _signal(_by_users(result)[12], "server_saturated")
    assert twelve.fired == (knee_users == 12), why
    assert (result.knee_users, result.max_concurrency) == (knee_users, capacity), why
    if twelve.fired:
        assert (twelve.fact.kv_peak_pct, twelve.fact.kv_pressure_pct) == (89.7, 85.0)


def test_a_stage_that_out_serves_the_plateau_makes_the_flat_stage_a_dip():
    """The dip rule still holds where the later stage truly recovers: llama-server's 125 → 144 →
    237 tok/s at 2 → 4 → 8 users (one user alone 70): 2 → 8 buys 0.27× per user, not flat."""
    summary = sweep(
        [2, 4, 8, 16], [125.0, 144.0, 237.0, 240.0], [900.0, 2000.0, 2300.0, 4800.0],
        baseline_tok_s=70.0, baseline_p95_ms=800.0,
    )  # fmt: skip
    result = _knee(summary)
    assert _by_users(result)[4].verdict == "critical"
    dip = _signal(_by_users(result)[4], "throughput_resumed")
    assert dip.fired and _by_users(result)[4].reasons[0] == dip
    assert (dip.fact.later_users, dip.fact.later_rate, dip.fact.rate) == (8, 237.0, 144.0)
    assert (result.knee_users, result.max_concurrency) == (16, 8)


#: per stage: users, tok/s, p95 ms, the client's running and waiting estimates, wait share %.
#: A busy machine (load 3.6 on 2 cores), 6 slots, no gauges: just past the limit the client's
#: gaps read 5.46 running; one level deeper the queue settles it at 6.0
BUSY_6_SLOTS = [
    (4, 328.0, 788.0, 3.99, 0.0, 0.0),
    (6, 438.0, 886.0, 5.95, 0.0, 0.0),
    (7, 396.0, 1310.0, 5.46, 0.86, 31.0),
    (8, 454.0, 1680.0, 6.0, 2.0, 60.0),
]
#: 40 slots in an exact FIFO loop: out-of-step requests read 41.4 at 44, 40.0 at 48
FIFO_40_SLOTS = [
    (32, 2800.0, 700.0, 32.0, 0.0, 0.0),
    (40, 3400.0, 760.0, 40.0, 0.0, 0.0),
    (44, 3420.0, 1500.0, 41.4, 2.6, 60.0),
    (48, 3430.0, 1900.0, 40.0, 8.0, 90.0),
]


@pytest.mark.parametrize(
    ("stages", "truth", "why"),
    [
        (BUSY_6_SLOTS, 6, "the deepest queue, not the lowest estimate"),
        (FIFO_40_SLOTS, 40, "the deepest queue reads the slots where just past them overshoots"),
    ],
)
def test_the_clients_slot_bound_comes_from_its_deepest_queue(stages, truth, why):
    levels, tok, p95, running, waiting, share = (list(col) for col in zip(*stages, strict=True))
    summary = sweep(
        levels, tok, p95, baseline_tok_s=88.0, baseline_p95_ms=680.0,
        client_running=running, client_waiting=waiting, client_wait_share_pct=share,
    )  # fmt: skip
    result = _knee(summary)
    assert result.client_slots == truth, why
    assert result.max_concurrency == truth, why
