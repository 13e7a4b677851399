"""The KV gauge's stage peak for a length mix: what the deploy answer's memory rule reads.

The deploy answer breaks on a stage's *peak* KV use (:func:`analysis.advice.deploy.
memory_broken`: the highest sample of the gauge over the stage's measured window). At fixed
lengths the batching model's mean use is that peak within a few per cent (``b`` sequences at
staggered points of one length). A mix is not: the sum of the contexts ``b`` running
sequences hold swings with which requests happen to run together, and a 9-s stage sampled
every 0.5 s catches its high swings. On the simulator's ``kv-bound`` preset with a lognormal
log (mean 280 prompt / 72 completion tokens), the stage at 8 users peaked at 89 % of the KV
budget while its mean use was about 64 %: the measured deploy answer stopped at 4 users where
the mean-use model said 10.

So for a mix the model's KV use at batch ``b`` is the stage peak of ``b`` **lanes**, each a
running slot that serves the mix's requests back to back (a closed loop keeps a full slot
busy: the next request is admitted as one ends), in engine steps:

1. A lane draws requests from the mix's ``(prompt, completion)`` records; a request holds
   ``prompt + k`` tokens at its ``k``-th decode step and runs ``completion`` steps. Each lane
   starts at a uniform point of its first request (no lockstep), then runs
   :data:`BURN_IN_REQUESTS` mean requests before the stage's window opens.
2. The gauge reads the lanes' sum ``samples`` times, ``seconds / samples`` apart, as the
   source run's gauge did (:class:`~analysis.predict.facts.GaugeWindow`); one step is the
   point model's step time at ``b`` (``step_ms``), so a slower step sees fewer requests turn
   over within the window.
3. The stage's peak is the largest of those sums. :data:`REPLICAS` independent stages give
   its spread. The point prediction reads their :data:`POINT_PERCENTILE`th percentile: a
   deploy figure is one a stage at it keeps under the memory threshold 9 times in 10, not
   one in two (on the case above, the median peak at 8 users read 82 %, its 90th percentile
   90 %, and the run's stage 89 %). Each of the interval's parameter sets reads one replica
   (:mod:`analysis.predict.batching` step 4), so the peak's own sampling noise rides in the
   interval.

Computed on at most :data:`BATCH_POINTS` batches spread geometrically and interpolated between
them (the peak grows smoothly with the batch). Fixed seed: the same mix gives the same table.
Pure numpy; no words.
"""

from __future__ import annotations

import numpy as np

from analysis.predict.facts import GaugeWindow

#: independent stages simulated per batch (the spread of the stage's peak)
REPLICAS = 32
#: batches the peak is simulated at (geometric from 1 to the largest), the rest interpolated
BATCH_POINTS = 40
#: the percentile of the replicas' peaks the point prediction reads (step 3)
POINT_PERCENTILE = 90.0
#: mean requests every lane runs before the window opens (its start forgotten)
BURN_IN_REQUESTS = 2.0
SEED = 0


def _stage_peaks(
    lengths: np.ndarray, batch: int, step_ms: float, window: GaugeWindow, rng: np.random.Generator
) -> np.ndarray:
    """Per replica, the largest sum over ``batch`` lanes of the held tokens at the gauge's
    sample times (steps 1–3 of the module docstring)."""
    prompts, completions = lengths[:, 0], np.maximum(lengths[:, 1], 1.0)
    mean_steps = float(completions.mean())
    every = window.seconds * 1000.0 / window.samples / max(step_ms, 1e-6)
    times = BURN_IN_REQUESTS * mean_steps + every * np.arange(window.samples)
    horizon = float(times[-1]) + 1.0
    lanes = batch * REPLICAS
    count = int(np.ceil(horizon / mean_steps)) + 4
    while True:
        picks = rng.integers(0, len(lengths), size=(lanes, count))
        steps = completions[picks]
        ends = np.cumsum(steps, axis=1) - rng.random((lanes, 1)) * steps[:, :1]
        if (ends[:, -1] > horizon).all():
            break
        count *= 2  # a lane of short requests ran out before the window closed
    current = (ends[:, :, None] <= times[None, None, :]).sum(axis=1)  # (lanes, samples)
    rows = np.arange(lanes)[:, None]
    started = ends[rows, current] - steps[rows, current]
    held = prompts[picks[rows, current]] + np.floor(np.maximum(times - started, 0.0))
    per_stage = held.reshape(REPLICAS, batch, window.samples).sum(axis=1)
    return np.asarray(per_stage.max(axis=1), dtype=float)


def peak_table(
    lengths: np.ndarray, step_ms: np.ndarray, window: GaugeWindow, seed: int = SEED
) -> np.ndarray:
    """The stage's peak KV use in tokens, shape ``(REPLICAS, len(step_ms))``: column ``b − 1``
    is batch ``b``, ``step_ms[b − 1]`` its step time. ``lengths``: the mix's ``(prompt,
    completion)`` records, shape ``(n, 2)``."""
    top = len(step_ms)
    rng = np.random.default_rng(seed)
    points = np.unique(np.round(np.geomspace(1, top, min(BATCH_POINTS, top))).astype(int))
    simulated = np.column_stack(
        [_stage_peaks(lengths, int(b), float(step_ms[b - 1]), window, rng) for b in points]
    )
    batches = np.arange(1, top + 1)
    return np.vstack([np.interp(batches, points, row) for row in simulated])
