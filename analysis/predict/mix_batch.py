"""The running batch of a length mix under a KV budget: a spread of counts, not one count.

At fixed lengths a KV budget holds ``⌊KV / context⌋`` sequences, the same count at every moment,
so a closed loop of ``N`` users runs ``min(N, that count)`` (:mod:`analysis.predict.batching`
step 1). A mix does not: how many fit depends on which requests happen to run together, so at
``N`` users the batch is ``min(N, count)`` for the count of the moment, and its mean over the
stage is ``E[min(N, count)]``. Each added user then adds a sequence only at the moments the
budget had room for one more, ``P(count ≥ N)`` of the time, and the throughput flattens where
that share falls under the flat rule's fraction: near a high percentile of the count, not at
its mean. On the simulator's ``kv-bound`` preset (a 4,096-token budget reserved per sequence)
with a lognormal log (medians 256 prompt and 64 completion tokens, σ 0.5), the server's running
gauge read 10.1–11.4 on average while the checking runs' knees sat at 13 and 14 users with and
without the gauges, and the mean-count model answered 10 (``benchmarks/bench_predict.py``).

The counts: :data:`SAMPLES` moments, each a run of the mix's records drawn by their time in the
batch (a running sequence is a long one as often as its completion is long: the same weighting
as the mix's mean context, :func:`analysis.predict.mix.read_mix`), each reserving its prompt and
completion; a moment's count is how many of its first records fit the budget (at least one:
the engine runs a sequence whatever its size). Fixed seed: the same mix and budget give the same
table. Pure numpy; no words.
"""

from __future__ import annotations

import numpy as np

#: moments drawn per budget (the count's distribution)
SAMPLES = 256
SEED = 0


def fitting_counts(lengths: np.ndarray, kv_tokens: np.ndarray, most: int) -> np.ndarray | None:
    """Per budget (rows of ``kv_tokens``, shape ``(sets, 1)``) and moment, the sequences of the
    mix (``(prompt, completion)`` rows) that fit, at most ``most`` (an infinite budget: ``most``);
    None where no budget is finite or the mix is empty."""
    budgets = np.asarray(kv_tokens, dtype=float).reshape(-1)
    finite = budgets[np.isfinite(budgets)]
    if finite.size == 0 or len(lengths) == 0:
        return None
    contexts = np.maximum(lengths[:, 0] + lengths[:, 1], 1.0)
    weights = np.maximum(lengths[:, 1], 1.0)
    depth = int(min(np.ceil(finite.max() / contexts.min()) + 1, most + 1))
    rng = np.random.default_rng(SEED)
    picks = rng.choice(len(contexts), size=(SAMPLES, depth), p=weights / weights.sum())
    reserved = np.cumsum(contexts[picks], axis=1)
    counts = np.empty((len(budgets), SAMPLES), dtype=float)
    for moment in range(SAMPLES):
        counts[:, moment] = np.searchsorted(reserved[moment], budgets, side="right")
    counts[~np.isfinite(budgets)] = most
    return np.clip(counts, 1.0, float(most))


def mean_batch_table(counts: np.ndarray, slots: np.ndarray, top: int) -> np.ndarray:
    """``E[min(N, slots, count)]`` for ``N = 1..top`` per row of ``counts`` (shape ``(sets,
    top)``): the sum over ``k < N`` of the share of moments with more than ``k`` running."""
    per_set = np.minimum(counts, np.asarray(slots, dtype=float).reshape(-1, 1))
    cap = np.clip(per_set, 0, top).astype(int)
    rows = cap.shape[0]
    flat = (np.arange(rows)[:, None] * (top + 1) + cap).reshape(-1)
    hist = np.bincount(flat, minlength=rows * (top + 1)).reshape(rows, top + 1)
    more_than = 1.0 - np.cumsum(hist, axis=1)[:, :top] / cap.shape[1]  # P(count > k), k < top
    return np.cumsum(more_than, axis=1)
