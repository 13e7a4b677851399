"""Where the simulator saturates, from its parameters alone: the ground truth for knee tests.

The model is a closed loop: ``c`` clients, no think time, every request ``input_tokens`` in and
exactly ``output_tokens`` out (``ignore_eos``). With ``b`` sequences running, one engine step lasts
``base + per_seq × b`` ms (``decode_base_ms``, ``decode_per_seq_ms``) and every finished request
is replaced by one whose prefill adds ``input_tokens × prefill_ms_per_token`` to some step. A
request needs ``output_tokens`` steps, so on average a step lasts::

    step(b) = base + per_seq × b + b × input_tokens × prefill_ms_per_token / output_tokens

and output throughput is ``X(b) = 1000 × b / step(b)`` tokens/s. Below saturation a client also
waits about half a step to be admitted after each request, so ``X(c) = 1000 × c × O / ((O + ½) ×
step(c))``.

The running batch cannot exceed three limits; the saturation concurrency ``c*`` is the smallest:

* **slots**: ``max_num_seqs``;
* **KV cache**: ``kv_cache_tokens // (input_tokens + output_tokens)`` sequences fit without
  preemption (vLLM admits more and then preempts, which wastes work rather than adding any);
* **compute**: ``X(b) = b / (a + k·b)`` flattens by itself; the compute limit is the ``b`` at
  which one more sequence adds only ``flat_fraction`` (default 0.1) of what a lone sequence
  achieves: ``b = (sqrt(a (a + k) / f) − a) / k``. With the presets' small ``per_seq`` it lies
  far beyond the slot limit.

Accuracy (measured against the simulator itself, ``benchmarks/bench_sim_streams.py`` and
``tests/loadknee_locust/sim/test_sim_saturation.py``): within 1–4 % when slots or compute bind. When
the KV cache
binds, vLLM-style over-admission plus preemption waste make it an estimate: measured steady state
was +16 % (``kv-tight``, 128/128) and −4 % (``gpu-like``, 512/256) from :func:`expected_throughput`.
Identical closed-loop requests move in step, so measure over several request lifetimes.

**Prefix caching** (``enable_prefix_caching``): ``cached_tokens`` of every prompt skip prefill,
so the prefill term uses ``input_tokens − cached_tokens`` (at least 1), and the cached blocks
are shared in the KV cache (counted once, :mod:`.prefixcache`): the KV limit becomes
``(kv_cache_tokens − S) // (input_tokens + output_tokens − S)`` with ``S`` the cached tokens in
whole blocks. With ``kv_reserve_max_tokens`` that limit is exact (no preemption); without it, an
estimate as above.

Beyond ``c*`` extra clients only queue: throughput stays at ``X(min(c, batch limit))`` while the
tail latency grows with the queue. **Predicted knee stage** (:func:`predicted_knee_level`): the
analysis's own flattening rule applied to this curve — the first tested level whose added users
each bring less than ``flat_gain_ratio`` (the analysis's default, 0.15) of one lone user's rate.
It is the first level beyond ``c*`` only when
the level before it already reaches ``c*``: with ``c* = 44`` and levels 32, 48, 64 the step to 48
still gains 0.20 per user (the model; 0.21 measured), so the knee is 64, not 48.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from loadknee_core.knee_params import DEFAULTS  # stdlib only: the analysis's own default
from loadknee_locust.sim.params import SimParams

FLAT_FRACTION = 0.1


def _per_seq_ms(
    params: SimParams, input_tokens: int, output_tokens: int, cached_tokens: int = 0
) -> float:
    prefilled = max(1, input_tokens - cached_tokens) if cached_tokens else input_tokens
    return params.decode_per_seq_ms + prefilled * params.prefill_ms_per_token / output_tokens


def kv_limit(
    params: SimParams, input_tokens: int, output_tokens: int, cached_tokens: int = 0
) -> int:
    """Sequences whose whole context fits in the KV cache at once (no preemption); with
    ``cached_tokens`` of every prompt in the prefix cache those blocks are held once, shared."""
    shared = cached_tokens // params.block_size * params.block_size
    if shared <= 0:
        return params.kv_cache_tokens // (input_tokens + output_tokens)
    return (params.kv_cache_tokens - shared) // (input_tokens + output_tokens - shared)


def compute_limit(
    params: SimParams,
    input_tokens: int,
    output_tokens: int,
    *,
    flat_fraction: float = FLAT_FRACTION,
    cached_tokens: int = 0,
) -> float:
    """Batch at which one more sequence adds only ``flat_fraction`` of a lone one's rate."""
    a = params.decode_base_ms
    k = _per_seq_ms(params, input_tokens, output_tokens, cached_tokens)
    if k <= 0:
        return math.inf
    return max(1.0, (math.sqrt(a * (a + k) / flat_fraction) - a) / k)


def saturation_concurrency(params: SimParams, input_tokens: int, output_tokens: int) -> float:
    """``c*``: the smallest of the slot, KV-cache and compute limits (see the module docstring),
    at the default ``flat_fraction`` and with no prefix-cache hits (every caller's case)."""
    if input_tokens < 0 or output_tokens < 1:
        raise ValueError("input_tokens must be ≥ 0 and output_tokens ≥ 1")
    kv = kv_limit(params, input_tokens, output_tokens)
    return float(min(params.max_num_seqs, kv, compute_limit(params, input_tokens, output_tokens)))


def expected_throughput(
    params: SimParams,
    concurrency: float,
    input_tokens: int,
    output_tokens: int,
    *,
    cached_tokens: int = 0,
) -> float:
    """Closed-loop output tokens/s at ``concurrency`` clients (see the module docstring)."""
    if concurrency <= 0:
        return 0.0
    kv = kv_limit(params, input_tokens, output_tokens, cached_tokens)
    cap = max(1, min(params.max_num_seqs, kv))
    batch = min(concurrency, cap)
    per_seq = _per_seq_ms(params, input_tokens, output_tokens, cached_tokens)
    step_ms = params.decode_base_ms + per_seq * batch
    queued = concurrency > cap  # a finished slot is refilled from the queue at once
    steps_per_request = output_tokens if queued else output_tokens + 0.5
    return 1000.0 * batch * output_tokens / (steps_per_request * step_ms)


def predicted_knee_level(
    params: SimParams,
    levels: Iterable[float],
    input_tokens: int,
    output_tokens: int,
    *,
    flat_gain_ratio: float = DEFAULTS.flat_gain_ratio,
    cached_tokens: int = 0,
) -> float | None:
    """The first tested level at which each added user brings less than ``flat_gain_ratio`` of
    a lone user's rate on the model's curve (the first step is measured from 1 user, as the
    analysis measures it from the baseline); None when throughput still grows at every level."""
    single = expected_throughput(
        params, 1, input_tokens, output_tokens, cached_tokens=cached_tokens
    )
    prev_users, prev_rate = 1.0, single
    for level in sorted(set(levels)):
        if level <= prev_users:
            continue
        rate = expected_throughput(
            params, level, input_tokens, output_tokens, cached_tokens=cached_tokens
        )
        if (rate - prev_rate) / (level - prev_users) < flat_gain_ratio * single:
            return level
        prev_users, prev_rate = level, rate
    return None
