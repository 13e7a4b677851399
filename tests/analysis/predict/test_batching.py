"""The batching model on synthetic parameters: capacities that follow from the parameters."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from analysis.predict.batching import (
    Draws,
    capacities,
    capacity_of,
    grid,
    kv_slots,
    sweep_capacities,
)
from analysis.predict.facts import CapacityParams, Estimate, Workload
from loadknee_core.knee_params import DEFAULTS

X = Estimate.exact


def params(alpha=10.0, beta=0.5, gamma=0.02, slots=None, kv=None) -> CapacityParams:
    return CapacityParams(X(alpha), X(beta), X(gamma), slots, None if kv is None else X(kv))


def point(p: CapacityParams, w: Workload, knee=DEFAULTS):
    return capacity_of(grid(Draws.point(p), w), knee)


def compute_bound_capacity(alpha: float, beta: float, ratio: float) -> int:
    """With no limit and no prefill, e2e(N)/e2e(1) = (α + βN)/(α + β): the first level whose
    tail reaches ``ratio`` is ⌈(ratio (α + β) − α) / β⌉, the capacity the level before it."""
    return math.ceil((ratio * (alpha + beta) - alpha) / beta) - 1


@pytest.mark.parametrize(
    ("case", "p", "w", "users", "bound", "ends"),
    [
        ("8 slots", params(slots=8), Workload(256, 64), 8, "slots", "flattening"),
        ("8 slots, 2x output", params(slots=8), Workload(256, 128), 8, "slots", "flattening"),
        ("KV 16 seqs", params(kv=16 * 80), Workload(16, 64), 16, "kv", "flattening"),
        ("KV, 2x output", params(kv=16 * 80), Workload(16, 128), 8, "kv", "flattening"),
        ("KV below slots", params(slots=8, kv=5 * 320), Workload(256, 64), 5, "kv", "flattening"),
        ("slots below KV", params(slots=4, kv=5 * 320), Workload(256, 64), 4, "slots",
         "flattening"),
        ("compute", params(beta=0.3, gamma=0.0), Workload(256, 64),
         compute_bound_capacity(10.0, 0.3, DEFAULTS.tail_ratio), "compute", "tail"),
    ],
)  # fmt: skip
def test_capacity_follows_from_the_parameters(case, p, w, users, bound, ends) -> None:
    cap = point(p, w)
    assert (cap.users, cap.bound, cap.ends_with) == (users, bound, ends), case


#: 16 slots, 256 + 64 tokens: each running sequence holds 288 tokens on average, reserves 320
MEMORY_W = Workload(256, 64)


@pytest.mark.parametrize(
    ("kv", "threshold", "gauged", "users", "ends", "bound"),
    [
        # 10 % a sequence; the budget holds 9: 90 % at 9 users is past 85 %
        (288 * 10, 85.0, True, 8, "memory", "kv"),
        (288 * 10, 90.0, True, 9, "flattening", "kv"),  # at the threshold exactly still counts
        (288 * 10, 95.0, True, 9, "flattening", "kv"),
        (288 * 10, 85.0, False, 9, "flattening", "kv"),  # no gauge: no memory to judge
        # 5 % a sequence: the 16 slots cap the batch at 80 %, past 75 % but not 85 %
        (288 * 20, 75.0, True, 15, "memory", "kv"),
        (288 * 20, 85.0, True, 16, "flattening", "slots"),
        (288 * 100, 10.0, True, 10, "memory", "kv"),  # 1 % a sequence: 11 % at 11 users
        (288 * 100, 85.0, True, 16, "flattening", "slots"),  # a large budget: never near it
    ],
)
def test_the_predicted_kv_use_binds_the_capacity_past_the_memory_threshold(
    kv, threshold, gauged, users, ends, bound
) -> None:
    draws = replace(Draws.point(params(slots=16, kv=kv)), gauged=gauged)
    g = grid(draws, MEMORY_W)
    cap = capacity_of(g, replace(DEFAULTS, memory_pressure_pct=threshold))
    assert (cap.users, cap.ends_with, cap.bound) == (users, ends, bound)
    # the use is the batch × the held context over the budget, where a gauge backs it
    expected = 100.0 * g.batch[0] * 288 / kv if gauged else np.full(len(g.users), np.nan)
    np.testing.assert_allclose(g.kv_pct[0], expected)
    # the offline batch judges the throughput alone: memory never moves it
    assert cap.offline_users == point(params(slots=16, kv=kv), MEMORY_W).offline_users


def test_doubling_the_output_halves_a_kv_bound_capacity() -> None:
    p = params(beta=0.1, kv=24 * 72)  # a small β: the KV binds before the tail doubles
    before, after = point(p, Workload(8, 64)), point(p, Workload(8, 128))
    assert before.bound == after.bound == "kv"
    assert after.users == pytest.approx(before.users / 2, abs=1)


def test_the_tail_threshold_is_the_knee_params_one() -> None:
    p = params(beta=0.3, gamma=0.0)
    strict = replace(DEFAULTS, tail_ratio=1.5)
    assert point(p, Workload(64, 64), strict).users == compute_bound_capacity(10.0, 0.3, 1.5)


def test_a_lower_flat_gain_threshold_moves_the_offline_figure_up() -> None:
    p = params(beta=0.3, gamma=0.0)
    w = Workload(64, 64)
    loose = replace(DEFAULTS, flat_gain_ratio=0.05)
    assert point(p, w, loose).offline_users > point(p, w).offline_users


def test_past_the_slots_latency_follows_littles_law() -> None:
    g = grid(Draws.point(params(slots=8)), Workload(256, 64))
    e2e, tok_s = g.e2e_ms[0], g.output_tok_s[0]
    assert e2e[15] == pytest.approx(2 * e2e[7])  # 16 users wait behind 8 slots: twice as long
    assert tok_s[15] == pytest.approx(tok_s[7])  # and the throughput stays where it was
    assert g.batch[0, 15] == 8
    assert g.ttft_ms[0, 15] > g.ttft_ms[0, 7]  # the wait shows in TTFT


def test_one_user_costs_the_prefill_and_a_step_per_token() -> None:
    g = grid(Draws.point(params(alpha=10.0, beta=0.5, gamma=0.02)), Workload(100, 50))
    assert g.e2e_ms[0, 0] == pytest.approx(50 * (10.0 + 0.5) + 0.02 * 100)
    assert g.ttft_ms[0, 0] == pytest.approx(10.0 + 0.5 + 0.02 * 100)


def test_rows_are_parameter_sets() -> None:
    draws = Draws.of([10.0, 10.0], [0.5, 0.5], [0.0, 0.0], [4.0, 8.0], [np.inf, np.inf])
    users, offline = capacities(grid(draws, Workload(64, 64)))
    assert list(users) == [4, 8] and list(offline) == [4, 8]


def test_kv_slots_reserve_the_whole_context() -> None:
    assert kv_slots(1000.0, Workload(100, 100)) == 5
    assert kv_slots(50.0, Workload(100, 100)) == 1  # never less than one sequence


def test_sweeping_blocks_of_levels_gives_the_full_grids_capacities() -> None:
    # small slot limits (decided in the first block), compute-bound sets whose knee lies past
    # 64 and past 128 users (a tiny β), and one that never fires below the top
    rng = np.random.default_rng(1)
    n = 40
    beta = np.concatenate([rng.uniform(0.2, 1.0, n - 4), [0.01, 0.003, 0.001, 0.0]])
    slots = np.concatenate([rng.choice([4.0, 8.0, np.inf], n - 4), [np.inf] * 4])
    gamma = np.concatenate([np.full(n - 1, 0.01), [0.0]])  # the last: a flat step, never fires
    draws = Draws.of(np.full(n, 10.0), beta, gamma, slots, np.full(n, np.inf))
    workload = Workload(256, 64)
    full = capacities(grid(draws, workload, 1024))
    swept = sweep_capacities(draws, workload, top=1024)
    assert full[0].max() > 128 and (full[0] == 1024).any()  # the blocks had to grow
    assert list(swept[0]) == list(full[0]) and list(swept[1]) == list(full[1])
