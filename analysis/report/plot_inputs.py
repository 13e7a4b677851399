"""What the PNGs are drawn from (:class:`PlotInputs`): the parts of an analysis the plots read.

Its own module so that both ends of the drawing name it without importing each other: the
painter (:mod:`analysis.report.painter`, no matplotlib) pickles it into its child, and the
figures (:mod:`analysis.report.figures`, matplotlib) draw from it there.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from analysis.model import KneeResult
from analysis.pipeline import Analysis
from analysis.report.answer_view import AnswerView, answer_view
from analysis.slo.evaluate import SloResult


@dataclass(frozen=True)
class PlotInputs:
    """What the PNGs are drawn from: the parts of an :class:`Analysis` the plots read (the child
    is sent these, not the whole run with its server samples)."""

    summary: pd.DataFrame
    knee: KneeResult
    stages: pd.DataFrame
    requests: pd.DataFrame
    gpu: pd.DataFrame | None
    server: pd.DataFrame | None
    slo: SloResult | None
    view: AnswerView | None = None  # the answer the plots mark (analysis.report.answer_view)

    @classmethod
    def of(cls, analysis: Analysis) -> PlotInputs:
        return cls(
            summary=analysis.summary,
            knee=analysis.knee,
            stages=analysis.run.stages,
            requests=analysis.run.requests,
            gpu=analysis.run.gpu,
            server=analysis.server_timeline,
            slo=analysis.slo,
            view=answer_view(analysis.knee, analysis.recommendations),
        )
