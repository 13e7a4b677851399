"""Mixed traffic classes (``--llm-classes``): each class's record table, shares, SLOs, and which
class binds.

The classes and their SLOs are read back from run.json (``parameters.llm_classes``, parsed by
:func:`loadknee_core.traffic_classes.parse_classes`, stdlib). Per class:

* its **record table**: :func:`analysis.stages.summary.summarize_stages` on the run with only that
  class's rows (the stages, windows and telemetry are the run's; the latency and throughput
  figures are the class's own);
* its **share** of each stage's measured requests, beside its weight;
* its **SLO verdicts and capacity**: :func:`analysis.slo.evaluate.evaluate_slos` with the class's
  SLOs on the class's measured rows alone (the rule is the run's: the highest level of the
  unbroken run of passing stages from the lowest), against the run's knee.

The **binding class** is the one with the lowest SLO capacity (no passing stage counts as 0);
ties go to the class that breaks its SLO at the lower level, then to the order given. Its first
broken stage is where the mix stops meeting every class's targets. The words are
:func:`analysis.report.slo_words.classes_text`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from analysis.inputs.load import Run
from analysis.model import KneeResult
from analysis.slo.evaluate import SloResult, evaluate_slos
from analysis.stages.summary import measured_requests, summarize_stages
from loadknee_core.slo_targets import SloParams, parse_slo
from loadknee_core.traffic_classes import TrafficClass, parse_classes


@dataclass(frozen=True)
class ClassResult:
    spec: TrafficClass
    summary: pd.DataFrame  # the class's record table
    shares: dict[int, float]  # stage → % of the stage's measured requests
    slo: SloResult | None  # None when the class has no SLO
    first_broken: int | None  # users of its first stage that broke an SLO

    @property
    def capacity(self) -> int | None:
        return None if self.slo is None else self.slo.capacity


@dataclass(frozen=True)
class ClassesResult:
    classes: tuple[ClassResult, ...]
    binding: str | None  # the binding class's name; None when no class has an SLO

    @property
    def binding_class(self) -> ClassResult | None:
        """The binding class's result (None when no class has an SLO)."""
        return next((r for r in self.classes if r.spec.name == self.binding), None)


def run_classes(run_info: Mapping[str, Any]) -> tuple[TrafficClass, ...]:
    """The run's ``--llm-classes`` (empty when none, or when the spec can no longer be read)."""
    params = run_info.get("parameters")
    text = params.get("llm_classes") if isinstance(params, Mapping) else None
    if not isinstance(text, str) or not text.strip():
        return ()
    try:
        return parse_classes(text)
    except ValueError:
        return ()


def stage_shares(measured: pd.DataFrame) -> pd.DataFrame:
    """% of each stage's measured requests (every outcome) per class: stages × classes."""
    rows = measured[measured["traffic_class"].notna() & (measured["traffic_class"] != "")]
    counts = rows.groupby(["stage", "traffic_class"]).size().unstack(fill_value=0)
    return counts.div(counts.sum(axis=1), axis=0) * 100.0


def _first_broken(slo: SloResult | None) -> int | None:
    if slo is None:
        return None
    broken = [s.target_users for s in slo.stages if not s.met]
    return min(broken) if broken else None


def analyze_classes(
    run: Run, knee: KneeResult, classes: tuple[TrafficClass, ...] | None = None
) -> ClassesResult | None:
    """Every class's table, shares and SLOs, and the binding class; None without classes."""
    classes = run_classes(run.run_info) if classes is None else classes
    if not classes:
        return None
    measured = measured_requests(run)
    shares = stage_shares(measured)
    results = []
    for spec in classes:
        mask = run.requests["traffic_class"] == spec.name
        own = dataclasses.replace(run, requests=run.requests[mask].reset_index(drop=True))
        summary = summarize_stages(own)
        slo = None
        if spec.slos:
            params = SloParams(slos=tuple(parse_slo(text) for text in spec.slos))
            slo = evaluate_slos(summary, knee, params=params, measured=measured_requests(own))
        share = shares[spec.name].to_dict() if spec.name in shares else {}
        stage_share = {int(float(str(k))): float(v) for k, v in share.items()}
        results.append(ClassResult(spec, summary, stage_share, slo, _first_broken(slo)))
    judged = [r for r in results if r.slo is not None]
    binding = None
    if judged:
        order = {r.spec.name: i for i, r in enumerate(results)}
        binding = min(
            judged,
            key=lambda r: (
                r.capacity or 0,
                r.first_broken if r.first_broken is not None else 10**9,
                order[r.spec.name],
            ),
        ).spec.name
    return ClassesResult(tuple(results), binding)
