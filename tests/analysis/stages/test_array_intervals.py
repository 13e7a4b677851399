"""The numpy intervals (analysis.stages.array_intervals) give the stdlib code's figures exactly.

Table-driven over row sets from plain to awkward: the same rows go through the stdlib
implementation (``loadknee_core.confidence`` via ``tests/analysis/stages/stdlib_intervals``, and the
knee's
one-resample-at-a-time loop written out here) and the array one; every figure must be equal, not
close (the report prints them and ``knee.json`` must not change).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from analysis.knee.confidence import knee_confidence
from analysis.knee.find import find_knee
from analysis.stages import array_intervals, intervals
from analysis.stages.baseline import compute_baseline
from analysis.stages.intervals import INTERVAL_COLUMNS, IntervalParams, StageBatches
from loadknee_core import confidence
from tests.analysis.stages.stdlib_intervals import resampled_tables, stage_batches
from tests.support.knee_frames import drawn_batches, sweep


def _rows(
    rng: np.random.Generator,
    n: int,
    *,
    stage: int = 0,
    t0: float = 1000.0,
    length_s: float = 60.0,
    e2e_ms: float = 400.0,
    sigma: float = 0.3,
) -> pd.DataFrame:
    e2e = rng.lognormal(np.log(e2e_ms), sigma, n)
    start = t0 + np.sort(rng.uniform(-2.0, length_s, n))
    return pd.DataFrame(
        {
            "stage": stage,
            "phase": np.where(rng.uniform(size=n) < 0.1, "warmup", "measure"),
            "outcome": np.where(rng.uniform(size=n) < 0.03, "timeout", "ok"),
            "length_ok": np.where(rng.uniform(size=n) < 0.02, 0.0, 1.0),
            "start_unix_s": start,
            "end_unix_s": start + e2e / 1000.0,
            "ttft_ms": e2e * 0.1,
            "completion_tokens": rng.integers(1, 300, n).astype(float),
            "e2e_ms": e2e,
        }
    )


def _plain(rng: np.random.Generator) -> pd.DataFrame:
    return pd.concat([_rows(rng, 3000), _rows(rng, 800, stage=1, t0=1100.0, e2e_ms=900.0)])


def _awkward(rng: np.random.Generator) -> pd.DataFrame:
    """Ties, NaN TTFTs and e2e values, zero-length requests, rows outside the window."""
    rows = _rows(rng, 1500, sigma=0.05)
    rows["e2e_ms"] = rows["e2e_ms"].round(-1)  # many equal values
    rows.loc[rows.index[::7], "ttft_ms"] = np.nan
    rows.loc[rows.index[::11], "e2e_ms"] = np.nan
    zero = rows.index[::13]
    rows.loc[zero, "end_unix_s"] = rows.loc[zero, "start_unix_s"]
    rows.loc[zero, "ttft_ms"] = 0.0
    rows.loc[rows.index[::17], "completion_tokens"] = np.nan
    rows.loc[rows.index[:5], "length_ok"] = np.nan  # unknown, not a mismatch
    rows.loc[rows.index[-40:], "start_unix_s"] += 30.0  # past the window's end
    rows.loc[rows.index[-40:], "end_unix_s"] += 30.0
    return rows


def _gappy(rng: np.random.Generator) -> pd.DataFrame:
    """A stall: no request ends in part of the window, so some time windows are empty."""
    rows = _rows(rng, 600, length_s=60.0)
    return rows[(rows["end_unix_s"] < 1020.0) | (rows["end_unix_s"] > 1035.0)]


def _small(rng: np.random.Generator) -> pd.DataFrame:
    """Too few rows for any tail interval (19 measured), and a stage with none at all."""
    rows = _rows(rng, 24)
    rows["phase"], rows["outcome"], rows["length_ok"] = "measure", "ok", 1.0
    return rows.iloc[:19]


def _long_requests(rng: np.random.Generator) -> pd.DataFrame:
    """Requests longer than a time window: fewer windows, each request spread over several."""
    return _rows(rng, 400, e2e_ms=9000.0, length_s=60.0)


def _one(rng: np.random.Generator) -> pd.DataFrame:
    return _rows(rng, 1)


def _none(rng: np.random.Generator) -> pd.DataFrame:
    return _rows(rng, 1).iloc[:0]


ROW_SETS: dict[str, Callable[[np.random.Generator], pd.DataFrame]] = {
    "plain": _plain,
    "awkward": _awkward,
    "gappy": _gappy,
    "small": _small,
    "long_requests": _long_requests,
    "one_row": _one,
    "no_rows": _none,
}

WINDOWS = pd.DataFrame(
    {"window_start": [1000.0, 1100.0, 1200.0], "window_end": [1060.0, 1160.0, 1201.0]},
    index=pd.Index([0, 1, 2], name="stage"),
)


def _same_batches(a: StageBatches, b: StageBatches) -> None:
    for field in ("stage", "batches", "median_span_s", "rates", "throughput", "p95", "p99"):
        assert getattr(a, field) == getattr(b, field), field
    assert a.window_s == b.window_s or (np.isnan(a.window_s) and np.isnan(b.window_s))
    assert [sorted(g) for g in a.e2e_groups] == [sorted(list(g)) for g in b.e2e_groups]


@pytest.mark.parametrize("name", list(ROW_SETS))
@pytest.mark.parametrize("batches", [10, 6])
def test_stage_batches_are_the_stdlib_figures(name: str, batches: int) -> None:
    rows = ROW_SETS[name](np.random.default_rng(len(name)))
    params = IntervalParams(batches=batches, resamples=150, seed=3)
    want = stage_batches(rows, WINDOWS, params=params)
    got = array_intervals.stage_batches(rows, WINDOWS, params=params)
    assert want.keys() == got.keys()
    for stage in want:
        _same_batches(want[stage], got[stage])
    columns = intervals.interval_columns(want, params=params)
    pd.testing.assert_frame_equal(
        columns, intervals.interval_columns(got, params=params), check_exact=True
    )
    if name == "plain":  # the table is not vacuous: real intervals were compared
        assert want[0].throughput is not None and want[0].p99 is not None
        assert want[1].p95 is not None


@pytest.mark.parametrize("n", [20, 21, 57, 400, 2001])
@pytest.mark.parametrize("q", [0.5, 0.95, 0.99])
def test_tail_intervals_are_the_stdlib_ones(n: int, q: float) -> None:
    rng = np.random.default_rng(n)
    ends = np.sort(rng.uniform(0.0, 30.0, n))
    values = rng.exponential(100.0, n).round(1)
    want = confidence.tail_interval(
        list(ends), list(values), 0.0, 30.0, q=q, batches=7, resamples=200, seed=n
    )
    pool = array_intervals.pool_of(values, array_intervals.window_of(ends, 0.0, 30.0, batches=7), 7)
    got = array_intervals.pool_intervals(pool, qs=(q,), level=0.95, resamples=200, seed=n)
    assert got[q] == want


@pytest.mark.parametrize("seed", range(4))
def test_window_rates_are_the_stdlib_sums(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ends = rng.uniform(-5.0, 65.0, 500)
    starts = ends - rng.choice([0.0, 0.3, 4.0, 25.0], 500)
    tokens = rng.integers(1, 500, 500).astype(float)
    want = confidence.batch_rates(list(ends), list(tokens), 0.0, 60.0, starts_s=list(starts))
    got = array_intervals.batch_rates(ends, tokens, 0.0, 60.0, starts=starts, batches=10)
    assert got == want


def _stdlib_resampled(
    summary: pd.DataFrame, batches: Mapping[int, StageBatches], rng: random.Random, column: str
) -> pd.DataFrame:
    """The knee's resample as it was computed one at a time with the stdlib (the reference)."""
    out = summary.copy()
    out.loc[:, list(INTERVAL_COLUMNS)] = np.nan
    tok = out["output_tok_s"].to_numpy(dtype=float).copy()
    other = out[column].to_numpy(dtype=float).copy()
    p95 = out["e2e_p95_ms"].to_numpy(dtype=float).copy()
    p99 = out["e2e_p99_ms"].to_numpy(dtype=float).copy()
    for i, stage in enumerate(out["stage"]):
        b = batches.get(int(stage))
        if b is None or not b.rates:
            continue
        drawn = rng.choices(b.rates, k=len(b.rates))
        rate = sum(drawn) / len(drawn)
        if tok[i] > 0:
            other[i] *= rate / tok[i]
        tok[i] = rate
        groups = [list(g) for g in b.e2e_groups if len(g)]
        if len(groups) >= 2:
            pooled = [v for g in rng.choices(groups, k=len(groups)) for v in g]
            p95[i], p99[i] = confidence.quantile(pooled, 0.95), confidence.quantile(pooled, 0.99)
    if column != "output_tok_s":
        out[column] = other
    out["output_tok_s"] = tok
    out["e2e_p95_ms"], out["e2e_p99_ms"] = p95, p99
    return out


LEVELS = [1, 2, 4, 8, 16]


def _summary_and_batches() -> tuple[pd.DataFrame, dict[int, StageBatches]]:
    summary = sweep(
        LEVELS, [100.0, 200.0, 390.0, 700.0, 720.0], [210.0, 215.0, 230.0, 300.0, 600.0],
        baseline_tok_s=100.0, baseline_p95_ms=200.0,
    )  # fmt: skip
    rng = np.random.default_rng(5)

    def sizes(stage: int) -> Iterable[int]:  # stage 3: one window holds every row
        return rng.integers(0, 40, 10) if stage != 3 else np.array([0] * 9 + [30])

    batches = drawn_batches(
        summary, rng, windows=10, rate_spread=0.05, tail_spread=0.3, sizes=sizes, without=2,
        whole_ms=True,
    )  # fmt: skip
    return summary, batches


@pytest.mark.parametrize("column", ["output_tok_s", "total_tok_s"])
def test_the_knees_resampled_tables_are_the_stdlib_ones(column: str) -> None:
    summary, batches = _summary_and_batches()
    ref = random.Random(11)
    want = [_stdlib_resampled(summary, batches, ref, column) for _ in range(30)]
    got = list(resampled_tables(summary, batches, random.Random(11), column, 30))
    assert len(got) == 30
    for a, b in zip(want, got, strict=True):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert len({float(t["e2e_p95_ms"].iloc[1]) for t in got}) > 1  # the draws do differ


def test_the_knees_confidence_counts_the_resampled_answers() -> None:
    summary, batches = _summary_and_batches()
    baseline = compute_baseline(None, summary)
    knee = find_knee(summary, baseline)
    got = knee_confidence(summary, baseline, knee, batches, resamples=40, seed=2)
    rng = random.Random(2)
    answers = [
        find_knee(_stdlib_resampled(summary, batches, rng, "output_tok_s"), baseline)
        for _ in range(40)
    ]
    same = sum(a.max_concurrency == knee.max_concurrency for a in answers)
    assert got.confidence_pct == same / 40 * 100.0


def test_the_pools_kept_from_the_tails_resample_as_the_windows_do() -> None:
    """The stage's sorted pool, kept by stage_batches, gives the resamples the groups give."""
    summary, _ = _summary_and_batches()
    rows = _plain(np.random.default_rng(9))
    measured = array_intervals.stage_batches(rows, WINDOWS, params=IntervalParams(resamples=50))
    assert all(b.e2e_pool is not None for b in (measured[0], measured[1]))
    stages = [int(s) for s in summary["stage"]]
    batches = {stages[1]: replace(measured[0], stage=stages[1]),
               stages[3]: replace(measured[1], stage=stages[3])}  # fmt: skip
    ref = random.Random(4)
    want = [_stdlib_resampled(summary, batches, ref, "output_tok_s") for _ in range(20)]
    got = resampled_tables(summary, batches, random.Random(4), "output_tok_s", 20)
    for a, b in zip(want, got, strict=True):
        pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_the_slowdowns_resample_with_their_e2e_windows() -> None:
    """A slowdown that is each e2e over one number bounds and resamples as the e2e does, over
    that number: the same windows, drawn alike; without slowdowns a stage has none."""
    summary, _ = _summary_and_batches()
    rows = _plain(np.random.default_rng(9))
    k = 250.0
    slow = rows["e2e_ms"].to_numpy(dtype=float) / k
    params = IntervalParams(resamples=50)
    measured = array_intervals.stage_batches(rows, WINDOWS, params=params, slowdown=slow)
    for b in (measured[0], measured[1]):
        for e2e, slowed in ((b.p95, b.slowdown_p95), (b.p99, b.slowdown_p99)):
            assert e2e is not None and slowed is not None
            assert (slowed.low, slowed.mean, slowed.high) == pytest.approx(
                (e2e.low / k, e2e.mean / k, e2e.high / k), rel=1e-12
            )
    plain = array_intervals.stage_batches(rows, WINDOWS, params=params)
    assert plain[0].slowdown_p95 is None and plain[0].slowdown_pool is None
    stages = [int(s) for s in summary["stage"]]
    batches = {stages[1]: replace(measured[0], stage=stages[1]),
               stages[3]: replace(measured[1], stage=stages[3])}  # fmt: skip
    summary = summary.assign(
        slowdown_p95=summary["e2e_p95_ms"] / k, slowdown_p99=summary["e2e_p99_ms"] / k
    )
    got = array_intervals.resampled_columns(summary, batches, random.Random(4), "qps", 20)
    for q in ("p95", "p99"):
        drawn = got[f"e2e_{q}_ms"][:, [1, 3]]
        assert np.ptp(drawn, axis=0).min() > 0  # the windows drawn moved the tail
        assert got[f"slowdown_{q}"] == pytest.approx(got[f"e2e_{q}_ms"] / k, rel=1e-12, nan_ok=True)


@pytest.mark.parametrize(
    ("win", "batches"),
    [
        ([0, 1, 0, -1, 2, 1, 0], 3),
        ([-1, -1], 2),  # no value in any window: every group empty
        ([], 4),
        ([1, 1, 1], 3),  # windows 0 and 2 empty, kept as empty groups
        ([0, 2, 1], 0),  # no windows at all
    ],
)
def test_window_groups_are_one_pass_per_window(win: list[int], batches: int) -> None:
    values = np.arange(len(win), dtype=float) * 1.5
    w = np.array(win, dtype=np.int64)
    got = array_intervals.window_groups(values, w, batches)
    want = tuple(values[w == g] for g in range(batches))
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.tolist() == b.tolist()  # the same values, in row order


@pytest.mark.parametrize(("seed", "before", "n"), [(0, 0, 1), (3, 5, 700), (11, 1000, 2500)])
def test_uniforms_are_the_generators_own_values_and_leave_it_where_it_would_be(
    seed: int, before: int, n: int
) -> None:
    """``before`` values taken first, so the state starts mid-block and ``n`` crosses the
    624-word regeneration."""
    ours, theirs = random.Random(seed), random.Random(seed)
    for _ in range(before):
        ours.random(), theirs.random()
    got = array_intervals.uniforms(ours, n)
    want = [theirs.random() for _ in range(n)]
    assert got.tolist() == want
    assert ours.getstate() == theirs.getstate()
    assert ours.random() == theirs.random()  # and the stream goes on alike


@pytest.mark.parametrize("population", [2, 7, 10, 24])
def test_choice_indices_are_what_choices_picks(population: int) -> None:
    ours, theirs = random.Random(population), random.Random(population)
    got = array_intervals.choice_indices(array_intervals.uniforms(ours, 3 * population), population)
    want = [theirs.choices(range(population), k=population) for _ in range(3)]
    assert got.reshape(3, population).tolist() == want
