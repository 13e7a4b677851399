"""A closed-loop model of continuous batching in steady state: users → batch → step → latency.

``N`` users each send one request of ``I`` prompt and ``O`` completion tokens, wait for its end
and send the next (no think time), as a stepped sweep's level does. The server runs:

1. **Batch**: ``b = min(N, slots, ⌊KV / (I + O)⌋)`` sequences at once — at most the slot limit,
   and as many as the KV budget holds when each sequence reserves its whole context (the
   prompt and every token it will generate). The other ``N − b`` users' requests wait in the
   queue. A mix under a KV budget: the mean over the moments of a stage of ``min(N, slots,
   the count that fits then)`` (:mod:`analysis.predict.mix_batch`), a fraction near the limit.
2. **Step**: each engine step decodes one token for every running sequence and costs
   ``α + β × b`` ms (the latency profile's line; with a measured step shape, plus the offset of
   the measured step from that line at ``b``, interpolated between the batches the run
   measured and held at the end ones beyond them), plus the prefill of the sequences it admits:
   a sequence runs ``O`` steps, so ``b / O`` are admitted per step on average, each costing
   ``γ × I`` ms. One step: ``t = α + β b + γ I b / O``.
3. **Rates**: ``b`` tokens per step: output ``1000 b / t`` tokens/s; ``b / (O t)`` requests per
   ms. **Latency** by Little's law on the closed loop: ``e2e = N O t / b``; the wait in the queue
   is ``e2e − O t``, and TTFT is that wait plus the admitting step (its own prefill whole:
   ``α + β b + γ I``).
4. **KV use** (where the budget came with a KV gauge, ``Draws.gauged``): ``b × H / KV`` of the
   budget, ``H`` the tokens a running sequence holds on average (prompt + half the completion:
   :attr:`~analysis.predict.facts.Workload.held_tokens`). Why half: the fit read the budget
   as the gauge's share of that same context (:func:`analysis.predict.fit.fit_capacity`), so at
   the run's own lengths and batch the model gives back the gauge's reading; the whole context
   would read a run's own gauge up to twice too high. A mix: the stage's peak instead, the
   largest sum of the held contexts the gauge would sample over a stage
   (:mod:`analysis.predict.kv_peak`, :attr:`Draws.held_peaks`) — the mean would miss the swings
   of which requests run together, which the memory rule reads. Without a gauge there is none
   to predict: the analysis judges memory on the gauge.
5. **Capacity** (:func:`capacities`): the method's knee signals on these figures, with the
   thresholds of :class:`~loadknee_core.knee_params.KneeParams` — the tail (e2e over the 1-user e2e)
   at or above ``tail_ratio``, or the throughput each added user brings below
   ``flat_gain_ratio`` of one user's rate, or the KV use above ``memory_pressure_pct`` (the
   deploy answer's own memory rule, :func:`analysis.advice.deploy.memory_broken`: that rule
   reads a stage's peak, and the model's batch is the one a full stage peaks at); the capacity
   is the level before the first that fires. Every request of a level has the same e2e here, so
   its P95 is its e2e: the model carries no spread, which is why the tail is held against the
   model's own 1-user figure, and why its KV use is its peak.

Everything is vectorised over parameter sets (rows) and levels (columns), so the interval's
resamples cost one array operation. Pure numpy; no words.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from analysis.advice.deploy import memory_broken
from analysis.predict.facts import (
    Bound,
    Capacity,
    CapacityParams,
    EndSignal,
    LevelFigures,
    Workload,
)
from analysis.predict.mix_batch import fitting_counts, mean_batch_table
from loadknee_core.knee_params import DEFAULTS, KneeParams

#: the most users a prediction looks at: far above any level a sweep tests
TOP_USERS = 1024


@dataclass(frozen=True)
class Draws:
    """Parameter sets as columns of shape (sets, 1); ``inf`` where there is no limit."""

    alpha_ms: np.ndarray
    beta_ms: np.ndarray
    prefill_ms_per_token: np.ndarray
    slots: np.ndarray
    kv_tokens: np.ndarray
    #: ``(batch, ms)`` offsets of the measured step from the line, the same for every set
    #: (:attr:`~analysis.predict.facts.CapacityFit.step_shape`); empty: the line alone
    shape: tuple[tuple[float, float], ...] = ()
    #: the KV budget came with a KV gauge, so the grid predicts its use per level and the
    #: capacity judges memory (:attr:`~analysis.predict.facts.CapacityFit.models_memory`)
    gauged: bool = False
    #: a mix's stage peak of the KV tokens held, shape ``(replicas, batches)``: column ``b − 1``
    #: is batch ``b``, parameter set ``i`` reads row ``i mod replicas``
    #: (:func:`analysis.predict.kv_peak.peak_table`); None: the mean use (fixed lengths)
    held_peaks: np.ndarray | None = None

    @classmethod
    def point(
        cls,
        params: CapacityParams,
        shape: tuple[tuple[float, float], ...] = (),
        *,
        gauged: bool = False,
    ) -> Draws:
        """The fitted values as one parameter set."""
        return replace(
            cls.of(
                [params.alpha_ms.value],
                [params.beta_ms.value],
                [params.prefill_ms_per_token.value],
                [params.slots if params.slots is not None else np.inf],
                [params.kv_tokens.value if params.kv_tokens is not None else np.inf],
            ),
            shape=shape,
            gauged=gauged,
        )

    def decode_ms(self, batch: np.ndarray) -> np.ndarray:
        """One decode step at ``batch`` (step 2 of the module docstring, prefill aside)."""
        line = self.alpha_ms + self.beta_ms * batch
        if not self.shape:
            return line
        xs, ys = (np.asarray(v, dtype=float) for v in zip(*self.shape, strict=True))
        return np.maximum(line + np.interp(batch, xs, ys), 1e-6)

    @classmethod
    def of(cls, alpha: object, beta: object, gamma: object, slots: object, kv: object) -> Draws:
        """Parameter sets from one sequence per parameter (the line's step, no shape)."""
        a, b, g, s, k = (
            np.asarray(c, dtype=float).reshape(-1, 1) for c in (alpha, beta, gamma, slots, kv)
        )
        return cls(a, b, g, s, k)


@dataclass(frozen=True)
class Grid:
    """The model's figures for every parameter set (rows) and level (columns)."""

    users: np.ndarray  # (levels,)
    batch: np.ndarray
    limit: np.ndarray  # 0 none, 1 slots, 2 kv (where the batch is below the users)
    step_ms: np.ndarray
    ttft_ms: np.ndarray
    e2e_ms: np.ndarray
    output_tok_s: np.ndarray
    tail_ratio: np.ndarray
    gain_ratio: np.ndarray  # NaN at 1 user
    kv_pct: np.ndarray  # the KV use, % of the budget (step 4); NaN: not predicted


LIMITS: tuple[Bound, ...] = ("none", "slots", "kv")


def kv_slots(kv_tokens: np.ndarray | float, workload: Workload) -> np.ndarray:
    """Sequences of this workload the KV budget holds, each reserving prompt + completion (a
    mix: its time-weighted mean context, :attr:`Workload.reserved_tokens`)."""
    per_seq = max(workload.reserved_tokens, 1.0)
    return np.maximum(np.floor(np.asarray(kv_tokens, dtype=float) / per_seq), 1.0)


def held_tokens(draws: Draws, batch: np.ndarray, workload: Workload) -> np.ndarray:
    """The KV tokens ``batch`` running sequences hold, as the memory rule reads them (step 4):
    the mean use at fixed lengths, a mix's stage peak where :attr:`Draws.held_peaks` has it."""
    table = draws.held_peaks
    if table is None:
        return batch * workload.held_tokens
    rows = (np.arange(batch.shape[0]) % table.shape[0])[:, None]
    # a mix's mean batch is a fraction (mix_batch): its stage peaks with the batch's whole count
    columns = np.clip(np.ceil(batch - 1e-9).astype(int) - 1, 0, table.shape[1] - 1)
    return np.asarray(table[rows, columns], dtype=float)


def grid(draws: Draws, workload: Workload, top: int = TOP_USERS) -> Grid:
    """Steps 1–4 of the module docstring at levels 1..``top`` for every parameter set."""
    users = np.arange(1, top + 1, dtype=float)
    n = users.reshape(1, -1)
    held = kv_slots(draws.kv_tokens, workload)
    batch = np.minimum(n, np.minimum(draws.slots, held))
    counts = fitting_counts(np.asarray(workload.lengths, dtype=float).reshape(-1, 2),
                            draws.kv_tokens, top)  # fmt: skip
    if counts is not None:  # a mix: the mean of the moments' batches (mix_batch)
        batch = mean_batch_table(counts, draws.slots, top)
    limit = np.where(batch < n, np.where(draws.slots <= held, 1, 2), 0)
    i, o = workload.input_tokens, max(workload.output_tokens, 1.0)
    gamma = draws.prefill_ms_per_token
    decode = draws.decode_ms(batch)
    step = decode + gamma * i * batch / o
    e2e = n * o * step / batch
    ttft = (e2e - o * step) + decode + gamma * i
    tok_s = 1000.0 * batch / step
    tail = e2e / e2e[:, :1]
    gain = np.full_like(tok_s, np.nan)
    gain[:, 1:] = (tok_s[:, 1:] - tok_s[:, :-1]) / tok_s[:, :1]
    kv = 100.0 * held_tokens(draws, batch, workload) / draws.kv_tokens
    kv_pct = kv if draws.gauged else np.full_like(kv, np.nan)
    return Grid(users, batch, limit, step, ttft, e2e, tok_s, tail, gain, kv_pct)


def _last_before(fired: np.ndarray, top: int) -> np.ndarray:
    """Per row: the level before the first that fired (``top`` where none did; 0 at level 1)."""
    first = np.where(fired.any(axis=1), fired.argmax(axis=1), top)
    return first.astype(float)  # level index i is i + 1 users: the level before is i users


def _fired(g: Grid, params: KneeParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where the throughput flattens, the tail departs, and the KV use breaks the memory rule
    (never where it is not predicted: NaN is above no threshold)."""
    flat = np.nan_to_num(g.gain_ratio, nan=np.inf) < params.flat_gain_ratio
    tail = g.tail_ratio >= params.tail_ratio
    memory = memory_broken(np.nan_to_num(g.kv_pct, nan=-np.inf), params.memory_pressure_pct)
    return flat, tail, memory


def capacities(g: Grid, params: KneeParams = DEFAULTS) -> tuple[np.ndarray, np.ndarray]:
    """Per parameter set: the capacity (users before the first level whose tail departs, whose
    throughput flattens or whose KV use passes the memory threshold) and the offline-batch
    figure (before it flattens alone: what a run's knee measures)."""
    flat, tail, memory = _fired(g, params)
    top = len(g.users)
    return _last_before(flat | tail | memory, top), _last_before(flat, top)


#: the first block of levels :func:`sweep_capacities` looks at; it doubles while some set's
#: signals have not fired
FIRST_BLOCK = 64


def sweep_capacities(
    draws: Draws, workload: Workload, params: KneeParams = DEFAULTS, top: int = TOP_USERS
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`capacities` over levels 1..``top``, computed on the fewest levels that decide it.

    A level's figures do not depend on the levels above it (the tail is held against 1 user,
    the gain against the level below), and a capacity is fixed by the first level that fires:
    so the grid is built on 64 levels, then 128, … up to ``top``, stopping once every parameter
    set has fired both ways. The same answer as ``capacities(grid(draws, workload, top))``,
    at a fraction of its cost where the capacities are small (the usual case): the report's
    what-if table asks for six predictions while ``loadknee analyze`` runs.
    """
    levels = min(FIRST_BLOCK, top)
    while True:
        users, offline = capacities(grid(draws, workload, levels), params)
        if levels >= top or ((users < levels).all() and (offline < levels).all()):
            return users, offline  # every set fired below ``levels``, or these are all levels
        levels = min(2 * levels, top)


def capacity_of(g: Grid, params: KneeParams = DEFAULTS, row: int = 0) -> Capacity:
    """One parameter set's capacity as a record: what fired, and what capped the batch."""
    users, offline = (float(a[row]) for a in capacities(g, params))
    top = len(g.users)
    ends: EndSignal
    if users >= top:
        ends, at = "none", top - 1
    else:
        at = int(users)  # index of the level that fired
        flat, tail, _ = (a[row, at] for a in _fired(g, params))
        # the deploy answer's own order at one stage: the knee before memory
        ends = "flattening" if flat else ("tail" if tail else "memory")
    limit = int(g.limit[row, at])
    bound: Bound = LIMITS[limit] if limit else ("compute" if users < top else "none")
    if ends == "memory":
        bound = "kv"  # the KV cache's use, whatever capped the batch
    return Capacity(
        users=int(users) if users >= 1 else None,
        ends_with=ends,
        bound=bound,
        batch=float(g.batch[row, int(users) - 1]) if users >= 1 else None,
        offline_users=int(offline) if offline >= 1 else None,
    )


def level_figures(g: Grid, levels: tuple[int, ...], row: int = 0) -> tuple[LevelFigures, ...]:
    """The figures of one parameter set at the given levels (users, 1-based)."""
    out = []
    for users in levels:
        k = users - 1
        gain, kv = g.gain_ratio[row, k], g.kv_pct[row, k]
        out.append(
            LevelFigures(
                users=users,
                batch=float(g.batch[row, k]),
                limit=LIMITS[int(g.limit[row, k])],
                step_ms=float(g.step_ms[row, k]),
                ttft_ms=float(g.ttft_ms[row, k]),
                e2e_ms=float(g.e2e_ms[row, k]),
                output_tok_s=float(g.output_tok_s[row, k]),
                tail_ratio=float(g.tail_ratio[row, k]),
                gain_ratio=None if np.isnan(gain) else float(gain),
                kv_pct=None if np.isnan(kv) else float(kv),
            )
        )
    return tuple(out)
