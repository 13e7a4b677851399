"""A length mix's running batch under a KV budget: the counts that fit, and their mean batch."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.predict.batching import Draws, grid, kv_slots
from analysis.predict.facts import CapacityParams, Estimate, Workload
from analysis.predict.mix_batch import SAMPLES, fitting_counts, mean_batch_table
from analysis.report.predict_words import batch_text

X = Estimate.exact


def _mix(records: list[tuple[float, float]]) -> Workload:
    """A mix's workload as :func:`analysis.predict.mix.read_mix` builds it."""
    lengths = np.asarray(records, dtype=float)
    inputs, outputs = lengths[:, 0], lengths[:, 1]
    context = float(((inputs + outputs) * outputs).mean() / outputs.mean())
    return Workload(float(inputs.mean()), float(outputs.mean()), context, tuple(records))


@pytest.mark.parametrize(
    ("budget", "context", "count"),
    [
        (4096.0, 320.0, 12),  # ⌊4096 / 320⌋
        (3200.0, 320.0, 10),  # exactly ten fit
        (100.0, 320.0, 1),  # not even one fits: the engine still runs one
    ],
)
def test_one_length_fits_the_same_count_at_every_moment(budget, context, count) -> None:
    counts = fitting_counts(np.array([[context - 64.0, 64.0]]), np.array([[budget]]), 1024)
    assert counts is not None and counts.shape == (1, SAMPLES)
    assert set(counts.ravel()) == {count}
    table = mean_batch_table(counts, np.array([[np.inf]]), 32)
    assert list(table[0]) == [float(min(n, count)) for n in range(1, 33)]


def test_an_infinite_budget_or_no_records_is_no_table() -> None:
    assert fitting_counts(np.array([[256.0, 64.0]]), np.array([[np.inf]]), 64) is None
    assert fitting_counts(np.empty((0, 2)), np.array([[4096.0]]), 64) is None
    # rows of one table: a set without a budget runs every user (up to the table's top)
    counts = fitting_counts(np.array([[256.0, 64.0]]), np.array([[4096.0], [np.inf]]), 64)
    assert counts is not None and set(counts[1]) == {64.0}


def test_the_slots_cap_every_moment() -> None:
    counts = fitting_counts(np.array([[256.0, 64.0]]), np.array([[4096.0]]), 64)  # 12 fit
    table = mean_batch_table(counts, np.array([[8.0]]), 16)
    assert table[0, 7] == table[0, 15] == 8.0 and table[0, 6] == 7.0


#: two lengths, equally often by request; the long ones run four times as long, so a moment's
#: batch holds mostly long ones: time-weighted context (192·32 + 768·128) / 160 = 652.8
TWO = [(160.0, 32.0), (640.0, 128.0)]


def test_a_mix_runs_every_user_below_its_fewest_and_levels_off_near_its_mean() -> None:
    w = _mix(TWO * 50)
    budget = np.array([[6528.0]])  # ten time-weighted mean contexts
    counts = fitting_counts(np.asarray(w.lengths), budget, 1024)
    assert counts is not None
    low, high = counts.min(), counts.max()
    assert 8 <= low < high <= 34  # 8 long ones at the fewest; the count varies by moment
    table = mean_batch_table(counts, np.array([[np.inf]]), 64)[0]
    assert list(table[: int(low)]) == [float(n) for n in range(1, int(low) + 1)]
    assert np.all(np.diff(table) >= 0) and np.all(np.diff(table) <= 1.0)
    # far past the limit the batch is the mean count: near the mean context's ⌊budget / c⌋
    assert table[-1] == pytest.approx(counts.mean())
    assert abs(table[-1] - float(kv_slots(budget, w)[0, 0])) <= 1.5
    # each added user adds a sequence only when the moment had room: the share of such moments
    share = (counts > 12).mean()
    assert table[12] - table[11] == pytest.approx(share)


def test_the_grid_runs_a_mix_on_its_mean_batch() -> None:
    w = _mix(TWO * 50)
    p = CapacityParams(X(10.0), X(0.5), X(0.02), None, X(6528.0))
    g = grid(Draws.point(p), w, 64)
    counts = fitting_counts(np.asarray(w.lengths), np.array([[6528.0]]), 64)
    expected = mean_batch_table(counts, np.array([[np.inf]]), 64)[0]
    assert list(g.batch[0]) == pytest.approx(list(expected))
    # between the fewest count and the most the throughput flattens gradually, not at once
    low, high = int(counts.min()), int(counts.max())
    steps = np.diff(g.output_tok_s[0])  # steps[k]: from k + 1 to k + 2 users
    between = steps[low - 1 : high - 1]
    assert np.all(between > 0) and np.all(np.diff(between) < 0)
    assert between[0] < steps[low - 2] and np.all(steps[high - 1 :] == 0)
    # the same mean work without its records: one count, the old corner
    fixed = grid(Draws.point(p), Workload(w.input_tokens, w.output_tokens, w.context_tokens), 64)
    assert set(fixed.batch[0, 20:]) == {float(kv_slots(np.array([[6528.0]]), w)[0, 0])}


@pytest.mark.parametrize(
    ("batch", "said"),
    [(8.0, "8"), (7.984375, "8.0"), (10.1640625, "10.2"), (12.0, "12"), (None, "—")],
)
def test_a_mean_batch_is_said_to_one_decimal_a_whole_one_as_it_is(batch, said) -> None:
    assert batch_text(batch) == said
