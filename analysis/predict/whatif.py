"""A fitted run and new lengths → the predicted capacity, its interval, and how far to trust it.

1. **Point**: the batching model (:mod:`analysis.predict.batching`) at the fitted values.
2. **Interval**: the model again at :data:`RESAMPLES` parameter sets drawn around the fitted
   values — α, β and the prefill cost each normal with the standard error its 95 % interval
   implies (kept ≥ 0), the KV budget likewise; the slot limit as measured. The interval is the
   5th–95th percentile of the capacities they give (90 %, as the knee's own fit). α and β are
   drawn independently though their fit correlates them, which widens the interval a little:
   on the safe side. A KV budget assumed from the knee (no gauge) is drawn present in half the
   sets and absent in the other half: the run could not tell the slots from the KV budget, so
   the interval spans both readings. Where the budget came with a KV gauge, each set's KV use
   per level is its own budget's (:mod:`~analysis.predict.batching` step 4), so the memory
   bound's spread rides in the interval as the tail's and the throughput's do.
3. **Reach**: the decode line was fitted over the batches the run measured. A capacity whose
   batch exceeds the largest of them extrapolates it: β's interval is widened by the ratio
   (batch / largest measured batch) and the prediction says so; beyond
   :data:`REFUSE_BEYOND` × the largest batch the model refuses a number (``beyond_measured``).
4. **Source**: a run that cannot tell its own capacity (``fit.cannot_tell``) gives no number
   (``source_cannot_tell``): what ``loadknee analyze`` would not say for the run's own lengths
   a what-if must not say for any.
5. **In sample**: the model at the source run's own lengths must reproduce its median e2e at
   the levels up to its capacity within :data:`~.insample.MISFIT_LIMIT`. Two steps are held
   against it: the straight line, and the measured steps (the line plus each measured batch's
   offset from it, ``step_model = "measured"``, :attr:`~.facts.CapacityFit.step_offsets`); the
   one whose worst miss is smaller runs the prediction (:func:`best_reproducing`). A step that is
   no straight line in the batch, such as llama.cpp's one-sequence fast path, takes the measured
   steps (a real llama-server run: the line 24 % off at 1 user, just inside the limit, and its
   prediction 4 where the real sweep measured 1; the measured steps 2 % off, predicting 1); a
   straight-line server keeps the line (the simulator's recorded run: 9.6 % against 10.3 %).
   A model that misses its own run by more than the limit even so gives no number
   (``model_misfit``, :mod:`analysis.predict.insample`): its interval covers the parameters'
   noise, not a wrong shape.
6. **Check**: the levels a real run should test to check it: one user, half the capacity, the
   interval's ends and the capacity, one past each, and twice the capacity.

Deterministic: the draws use a fixed seed, so the same run gives the same interval.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import NotRequired, TypedDict

import numpy as np

from analysis.predict.batching import (
    TOP_USERS,
    Draws,
    capacity_of,
    grid,
    level_figures,
    sweep_capacities,
)
from analysis.predict.batching import kv_slots as kv_slots_of
from analysis.predict.facts import CapacityFit, Estimate, GaugeWindow, Prediction, Workload
from analysis.predict.insample import misfit, worst_miss
from analysis.predict.kv_peak import POINT_PERCENTILE, peak_table
from loadknee_core.knee_params import DEFAULTS, KneeParams

#: parameter sets drawn for the interval
RESAMPLES = 400
#: no number past this multiple of the largest batch measured
REFUSE_BEYOND = 2.0
SEED = 0


def _draw(rng: np.random.Generator, e: Estimate, n: int, widen: float = 1.0) -> np.ndarray:
    """``n`` values around ``e.value`` with the standard error its 95 % interval implies."""
    se = widen * (e.high - e.low) / (2 * 1.96)
    values = rng.normal(e.value, se, n) if se > 0 else np.full(n, e.value)
    return np.maximum(values, 0.0)


def draws(
    fit: CapacityFit, n: int, widen: float = 1.0, seed: int = SEED, *, gauged: bool = False
) -> Draws:
    """``n`` parameter sets around the fit (step 2 of the module docstring); ``gauged``: they
    judge their KV use (:func:`judges_memory`)."""
    rng = np.random.default_rng(seed)
    p = fit.params
    alpha = _draw(rng, p.alpha_ms, n)
    beta = _draw(rng, p.beta_ms, n, widen)
    gamma = _draw(rng, p.prefill_ms_per_token, n)
    slots = np.full(n, p.slots if p.slots is not None else np.inf)
    if p.kv_tokens is None:
        kv = np.full(n, np.inf)
    else:
        kv = np.maximum(_draw(rng, p.kv_tokens, n), 1.0)
        if fit.kv_source == "knee_assumed":
            kv[1::2] = np.inf  # slots or KV: the run could not tell
    alpha = np.where(alpha + beta > 0, alpha, 1e-6)  # a step takes some time
    sets = Draws.of(alpha, beta, gamma, slots, kv)
    return replace(sets, shape=fit.step_shape, gauged=gauged)


def with_stage_peaks(sets: Draws, table: np.ndarray | None, *, point: bool = False) -> Draws:
    """``sets`` reading a mix's stage peaks (each set its own replica; ``point``: the one set
    reads the replicas' :data:`~analysis.predict.kv_peak.POINT_PERCENTILE`), or as they are
    where there is no table."""
    if table is None:
        return sets
    if point:
        table = np.percentile(table, POINT_PERCENTILE, axis=0, keepdims=True)
    return replace(sets, held_peaks=table)


def stage_peak_table(
    fit: CapacityFit,
    workload: Workload,
    sets: Draws,
    top: int,
    window: GaugeWindow | None = None,
) -> np.ndarray | None:
    """A mix's stage peaks (:func:`~analysis.predict.kv_peak.peak_table`) up to the largest
    batch any of ``sets`` can run, each batch at the point's step, its stage read as
    ``window`` says (else as the fitted run read its own); None where memory is not judged,
    the lengths are fixed or no window is known."""
    window = window or fit.gauge_window
    if not (sets.gauged and workload.lengths and window is not None):
        return None
    cap = np.minimum(sets.slots, kv_slots_of(sets.kv_tokens, workload))
    largest = int(min(top, float(np.max(cap))))
    batch = np.arange(1, largest + 1, dtype=float)
    point = Draws.point(fit.params, fit.step_shape)
    prefill = (
        point.prefill_ms_per_token
        * workload.input_tokens
        * batch
        / max(workload.output_tokens, 1.0)
    )
    step = (point.decode_ms(batch) + prefill)[0]
    return peak_table(np.asarray(workload.lengths, dtype=float), step, window)


def judges_memory(fit: CapacityFit, params: KneeParams) -> bool:
    """Whether the prediction judges memory: where the fit predicts the KV use
    (:attr:`~.facts.CapacityFit.models_memory`) and the knee reads the KV gauge — not where it
    was told to read GPU memory alone (``memory_source`` ``gpu``), which the model does not
    predict."""
    return fit.models_memory and params.memory_source != "gpu"


def best_reproducing(fit: CapacityFit) -> CapacityFit:
    """The fit with the step that reproduces the run's own latency better (step 5): the line,
    or the measured steps where their worst in-sample miss is smaller. The line is kept where
    nothing can be compared or no offsets were kept."""
    if not fit.step_offsets:
        return fit
    shaped = replace(fit, step_model="measured")
    line_miss, shaped_miss = worst_miss(fit), worst_miss(shaped)
    if line_miss is None or shaped_miss is None:
        return fit
    return shaped if abs(shaped_miss.miss) < abs(line_miss.miss) else fit


def check_levels(users: int, low: int | None, high: int | None) -> tuple[int, ...]:
    """The levels a run that checks the prediction tests (step 6)."""
    lo, hi = low or users, high or users
    wanted = {1, max(1, users // 2), lo, users, users + 1, hi, hi + 1, 2 * users}
    return tuple(sorted(wanted))


def _shown_levels(users: int | None, top: int) -> tuple[int, ...]:
    """Levels whose figures the answer carries: powers of two up to twice the capacity, and
    the capacity and the level after it."""
    end = min(top, 2 * (users or 8))
    shown = {2**k for k in range(int(math.log2(end)) + 1)}
    if users:
        shown |= {users, min(users + 1, top)}
    return tuple(sorted(u for u in shown if 1 <= u <= top))


class _Limits(TypedDict):
    """The knee thresholds every :class:`~.facts.Prediction` carries, as its keywords, and
    the stage a mix's KV peak was read over (where it was)."""

    tail_ratio_limit: float
    flat_gain_limit: float
    memory_limit: float | None
    peak_window: NotRequired[GaugeWindow | None]


def predict(
    fit: CapacityFit,
    workload: Workload,
    params: KneeParams = DEFAULTS,
    *,
    resamples: int = RESAMPLES,
    top: int = TOP_USERS,
    window: GaugeWindow | None = None,
) -> Prediction:
    """The prediction at ``workload`` (see the module docstring); ``window``: how the run to
    be predicted reads its KV gauge over a stage (a mix's stage peak; None: as the fitted run
    did)."""
    p = fit.params
    kv_slots = None if p.kv_tokens is None else float(kv_slots_of(p.kv_tokens.value, workload))
    judged = judges_memory(fit, params)
    memory = params.memory_pressure_pct if judged else None
    limits = _Limits(
        tail_ratio_limit=params.tail_ratio,
        flat_gain_limit=params.flat_gain_ratio,
        memory_limit=memory,
    )
    empty = Prediction(workload, fit, None, None, None, None, None, 0, (), False, 1.0,
                       "no_decode_fit", kv_slots, (), **limits)  # fmt: skip
    if fit.cannot_tell is not None:
        return replace(empty, refusal="source_cannot_tell")
    if not all(math.isfinite(e.value) for e in (p.alpha_ms, p.beta_ms)):
        return empty
    fit = best_reproducing(fit)
    miss = misfit(fit)
    if miss is not None:
        return replace(empty, refusal="model_misfit", misfit=miss)
    # a mix's stage peaks, sized by the sets (their KV budgets do not depend on the widening)
    peaks = stage_peak_table(fit, workload, draws(fit, resamples, gauged=judged), top, window)
    if peaks is not None:
        limits["peak_window"] = window or fit.gauge_window
    point_draws = with_stage_peaks(Draws.point(p, fit.step_shape, gauged=judged), peaks, point=True)
    g = grid(point_draws, workload, top)
    point = capacity_of(g, params)
    shown = level_figures(g, _shown_levels(point.users, top))
    reach = (point.batch or 0.0) / max(fit.max_batch, 1.0)
    extrapolated = reach > 1.0 + 1e-9
    if reach > REFUSE_BEYOND:
        return Prediction(workload, fit, point, None, None, None, None, 0, (), True, reach,
                          "beyond_measured", kv_slots, (), **limits)  # fmt: skip
    widen = max(reach, 1.0)
    sets = with_stage_peaks(draws(fit, resamples, widen, gauged=judged), peaks)
    users, offline = sweep_capacities(sets, workload, params, top)
    low, high = (int(v) for v in np.percentile(users, [5, 95], method="nearest"))
    off_low, off_high = (int(v) for v in np.percentile(offline, [5, 95], method="nearest"))
    # the point lies inside its interval (a skewed draw can leave it just outside)
    c = point.users or 0
    low, high = min(low, c), max(high, c)
    return Prediction(
        workload=workload,
        fit=fit,
        point=point,
        low=low or None,
        high=high or None,
        offline_low=off_low or None,
        offline_high=off_high or None,
        resamples=resamples,
        levels=shown,
        extrapolated=extrapolated,
        widened_by=widen,
        refusal=None,
        kv_slots=kv_slots,
        check_levels=check_levels(c, low, high) if c else (),
        **limits,
    )
