"""The predictions around a run's own lengths that ``report.html`` shows beside its answer.

:func:`around_the_run`: the model fitted from the run (:func:`~analysis.predict.fit.
fit_capacity`) predicts at the run's own mean lengths (so the reader sees how close the model
comes to what was measured), then at :data:`FACTORS` × the prompt and × the completion, one
length changed at a time, with the thresholds the run was judged with. Each row is a whole
:class:`~analysis.predict.facts.Prediction` (interval, limit that binds, extrapolation or
refusal), the same one ``loadknee predict --input-tokens/--output-tokens`` gives. Six
predictions of the interval's 400 resamples cost a few milliseconds
(:func:`~analysis.predict.batching.sweep_capacities`), so ``loadknee analyze`` stays fast.
Facts only; :mod:`analysis.report.whatif_html` words them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from analysis.predict.facts import Prediction, Workload
from analysis.predict.fit import fit_capacity
from analysis.predict.whatif import predict

if TYPE_CHECKING:
    from analysis.pipeline import Analysis

#: the multiples of the run's prompt and completion lengths the table predicts at
FACTORS = (0.5, 2.0, 4.0)
#: which length a row changed: none (the run's own), the prompt, the completion
Changed = Literal["as_run", "input", "output"]


@dataclass(frozen=True)
class WhatIfRow:
    """One prediction: the length changed, by what factor, and the prediction there."""

    changed: Changed
    factor: float
    prediction: Prediction


def around_the_run(analysis: Analysis) -> tuple[WhatIfRow, ...]:
    """The run's own lengths, then each factor × the prompt, then × the completion; empty where
    the run gives no answer or no ok request counted its lengths (nothing to scale)."""
    if analysis.standing.cannot_tell:
        return ()
    fit = fit_capacity(analysis)
    run = fit.workload
    if not all(math.isfinite(v) and v >= 1 for v in (run.input_tokens, run.output_tokens)):
        return ()
    asked: list[tuple[Changed, float, Workload]] = [("as_run", 1.0, run)]
    asked += [("input", f, Workload(run.input_tokens * f, run.output_tokens)) for f in FACTORS]
    asked += [("output", f, Workload(run.input_tokens, run.output_tokens * f)) for f in FACTORS]
    return tuple(
        WhatIfRow(changed, factor, predict(fit, workload, analysis.knee_params))
        for changed, factor, workload in asked
    )
