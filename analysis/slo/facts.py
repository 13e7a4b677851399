"""The SLO verdicts as typed records: what broke a stage and why the capacity may be off.

:func:`analysis.slo.evaluate.evaluate_stage` judges each stage against the user's targets; what
it finds is kept here as values, never as words: each target's :class:`SloCheck` (the measured
figure, the limit and by how much it was missed), each :class:`SloBreak` (a ``kind`` from a
closed vocabulary with its figures) and the :class:`CapacityDoubt` of the stages that decide the
capacity. :mod:`analysis.report.slo_words` writes their words for the screen, ``--explain``,
record.md, report.html and knee.json alike; the SLO tests assert on these records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from loadknee_core.slo_targets import Slo

#: why a stage broke the SLOs: a target over its limit, a target with no figure in the stage,
#: too few good requests, goodput asked without the raw rows, or the knee's red line
BreakKind = Literal["over", "not_measured", "goodput_short", "goodput_needs_rows", "red_line"]


@dataclass(frozen=True)
class SloCheck:
    """One SLO on one stage: the measured value, the limit, and by how much it was missed."""

    key: str  # e.g. ttft_p95_ms
    slo: Slo  # the target
    value: float | None  # ms (s per 1k tokens for s_per_1k); None: not measured
    limit: float
    met: bool
    over_pct: float | None  # (value / limit - 1) × 100 when broken


@dataclass(frozen=True)
class SloBreak:
    """One reason a stage broke the SLOs: ``check`` for ``over`` and ``not_measured``;
    ``good_pct`` (None: no request judged) against ``min_pct`` for ``goodput_short``."""

    kind: BreakKind
    check: SloCheck | None = None
    good_pct: float | None = None
    min_pct: float | None = None


@dataclass(frozen=True)
class CapacityDoubt:
    """Why the SLO capacity may be off: the first breaking stage (its users) is too noisy or
    short to judge, stages above the break pass again, or the last passing stage is too noisy."""

    breaker_noisy_users: int | None = None  # the capacity may be higher
    passes_again_users: tuple[int, ...] = ()  # the break may be noise
    setter_noisy_users: int | None = None  # the capacity may be lower
