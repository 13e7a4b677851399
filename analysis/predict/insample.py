"""The in-sample check: does the model reproduce the run it was fitted from?

Before a prediction at other lengths, :func:`~analysis.predict.whatif.predict` runs the model
at the source run's own lengths (``fit.workload``) with the point parameters and compares its
e2e, level by level, with the run's median e2e (``fit.measured_e2e_ms``), at the judged step
and refine levels up to and including the run's capacity: the levels where no request waited,
the ones the fit's decode line and prefill cost describe. The model has no spread (every
request of a level has the same e2e), so it is held against the median, not the P95.

Why a check of its own: the prediction's interval resamples the fitted parameters, so it
covers their noise but not a wrong shape. A server whose step is not a straight line in the
batch (llama.cpp's one-sequence fast path: ~7.4 ms alone, ~18.9 ms with two sequences) gets a
line through its stages that misses the run itself by ~28 % at 1 user, and a prediction from
it that missed a real sweep by 4× with the truth outside its interval. A model that cannot
reproduce its own source would predict other lengths by luck: above :data:`MISFIT_LIMIT` the
line gives way to the measured steps (:func:`analysis.predict.whatif.predict`), and a model that
misses even so is refused (``model_misfit``), the worst level's facts in
:class:`~analysis.predict.facts.InSampleMiss`.

Pure: the fit in, the worst level out; no words.
"""

from __future__ import annotations

import math

from analysis.predict.batching import Draws, grid
from analysis.predict.facts import CapacityFit, InSampleMiss

#: the largest relative miss (model − measured) / measured, at any level up to the capacity,
#: that a prediction accepts. Measured: the simulator's recorded run (preset ``fast``,
#: tests/support/data/imports/loadknee) misses its own medians by at most +9.6 % (at 8 users),
#: the e2e suite's simulator sweeps (tests/support/recorded_runs.py, four sessions' recordings)
#: by at most 14.6 %, the test fixture's engine (``write_run_dir(prefill_stalls=True)``) by
#: 2.1 %; the fast-path llama.cpp run by +28 % at 1 user. The line sits between, with room
#: for a real server's noise on a short stage; not tuned to pass any run (the recorded
#: refusing-server runs of tests/support/data/busy_runs, 8 tokens a chunk so their line is on
#: TPOT, fit their 1-user medians within 10 % but miss by +139 to +278 % at the most users:
#: the model charges each newcomer's prefill to every running sequence and that server's
#: prefill stalls nobody; they are rightly refused)
MISFIT_LIMIT = 0.25


def worst_miss(fit: CapacityFit, limit: float = MISFIT_LIMIT) -> InSampleMiss | None:
    """The level up to the run's capacity where the model misses the run's median e2e most
    (None: no capacity, no such level measured, or no finite model)."""
    cap = fit.measured_capacity
    p = fit.params
    w = fit.workload
    finite = (p.alpha_ms.value, p.beta_ms.value, w.input_tokens, w.output_tokens)
    if cap is None or not all(math.isfinite(v) for v in finite):
        return None
    measured = [(u, ms) for u, ms in fit.measured_e2e_ms if 1 <= u <= cap and ms > 0]
    if not measured:
        return None
    e2e = grid(Draws.point(p, fit.step_shape), w, max(u for u, _ in measured)).e2e_ms[0]
    misses = [
        InSampleMiss(u, float(e2e[u - 1]), ms, (float(e2e[u - 1]) - ms) / ms, limit)
        for u, ms in measured
    ]
    return max(misses, key=lambda m: abs(m.miss))


def misfit(fit: CapacityFit, limit: float = MISFIT_LIMIT) -> InSampleMiss | None:
    """The worst level where it misses by more than ``limit`` (None: the model fits its run, or
    there is nothing to check it against)."""
    worst = worst_miss(fit, limit)
    return worst if worst is not None and abs(worst.miss) > limit else None
