"""The report's what-if table: the predicted capacity around the run's lengths, in words.

Beside the measured answer, :func:`whatif_html` shows what the model fitted from this run
(:mod:`analysis.predict.around`) predicts at the run's own lengths and at ×0.5, ×2 and ×4 the
prompt and the completion: the capacity with its 90 % interval, the limit that binds, and how
far the prediction reaches — within the batches the run measured, extrapolated beyond them
(interval widened), or refused. A prediction, not a measurement: the caption says so and names
the command that asks for other lengths. Empty where there are no rows (no answer to scale).
"""

from __future__ import annotations

from collections.abc import Sequence

from analysis.predict.around import WhatIfRow
from analysis.predict.facts import Prediction
from analysis.report.html_kit import esc, table
from analysis.report.predict_words import batch_text, bound_text, misfit_text, span_text

#: the table's columns, in order
HEADERS = ("lengths", "prompt + completion tokens", "capacity (90 % interval)", "binds", "reach")


def _change(row: WhatIfRow) -> str:
    if row.changed == "as_run":
        return "as run (the model at the run's own lengths)"
    return f"{row.factor:g}× the {'prompt' if row.changed == 'input' else 'completion'}"


def _tokens(p: Prediction) -> str:
    w = p.workload
    return f"{w.input_tokens:.0f} + {w.output_tokens:.0f}"


def _capacity(p: Prediction) -> str:
    if p.refusal is not None or p.point is None or p.point.users is None:
        return "—"
    return span_text(p.point.users, p.low, p.high)


def _binds(p: Prediction) -> str:
    if p.refusal == "no_decode_fit" or p.point is None:
        return "—"
    return bound_text(p.point)


def reach_words(p: Prediction) -> str:
    """Within the run, extrapolated (and by how much) or refused, in a table cell's words."""
    largest = f"{p.fit.max_batch:g}"
    if p.refusal == "no_decode_fit":
        return "no prediction: the decode step could not be fitted"
    if p.refusal == "model_misfit" and p.misfit is not None:
        return f"refused: the model misses the run it was fitted from: {misfit_text(p.misfit)}"
    if p.refusal == "beyond_measured" and p.point is not None:
        return (
            f"refused: needs a batch of {batch_text(p.point.batch)}, over twice the largest "
            "measured "
            f"({largest})"
        )
    if p.extrapolated and p.point is not None:
        return (
            f"extrapolates: a batch of {batch_text(p.point.batch)} beyond the largest measured "
            f"({largest}); interval widened ×{p.widened_by:.2f}"
        )
    return f"within the run (largest batch {largest})"


def whatif_html(rows: Sequence[WhatIfRow], measured: int | None) -> str:
    """The table and its caption (``measured``: the run's own capacity, beside the model's)."""
    if not rows:
        return ""
    body = [
        [esc(_change(r)), esc(_tokens(r.prediction)), esc(_capacity(r.prediction)),
         esc(_binds(r.prediction)), esc(reach_words(r.prediction))]
        for r in rows
    ]  # fmt: skip
    told = "none" if measured is None else f"{measured}"
    caption = (
        f"Predicted, not measured: the capacity model fitted from this run (measured capacity "
        f"{told}) at other lengths, one changed at a time. Other lengths or a prompt log: "
        "<code>loadknee predict RUN_DIR --input-tokens N --output-tokens M</code> or "
        "<code>--prompt-log LOG</code>; the model is in the method (What-if prediction)."
    )
    shown = table(HEADERS, body, numeric=(1, 2), css="whatif")
    return f'<h3 id="what-if">What if?</h3><p class="legend">{caption}</p>{shown}'
