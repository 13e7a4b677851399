"""``knee.json``: the knee, verdicts, baseline, recommendations and summary rows as strict JSON.

Strict means ``json.dumps(allow_nan=False)`` succeeds: NaN and infinities become ``null`` (a
missing number, never 0), numpy scalars become Python numbers, tuples become lists. The reverse,
:func:`from_json`, rebuilds the frozen objects and the summary frame, so ``loadknee compare`` can
read a report written earlier and tests can round-trip it.

Layout (``schema`` 2)::

    {"schema": 2, "run_id": ..., "percentile_method": ...,
     "knee": KneeResult, "baseline": Baseline | null,   # each signal: name, fired, value,
                                               # threshold, text (its words) and fact (what it
                                               # measured: {"kind": ..., figures}, or null)
     "recommendations": {"items": [...], "server_flags": [...], "withheld": [...],
                         "deploy": DeployAnswer | null, "provisional": "",
                         "cannot_tell": true (only where the answer is "cannot tell")} | null,
     "summary": [{column: value, ...}, ...],   # one object per stage, SUMMARY_COLUMNS order
     "answer": {"deploy_concurrency", "capacity", "capacity_interval", ...},
                                               # the figures every output shows, named as in
                                               # docs/method.md (analysis.report.answer_view)
     "slo": SloResult,                         # only when SLOs were given (limits, stages,
                                               # capacity, binding; in words by
                                               # report.slo_words.slo_json); read back as a
                                               # plain dict
     "prefix_cache": {...}, "conversations": {...}, "classes": {...},
                                               # only where they apply (analysis.report.workload)
     "standing": Standing}                     # only when the answer is partial or "cannot
                                               # tell" (analysis.advice.standing)

Schema 1 is the same without the signals' ``fact``; it is still read (its signals keep their
words). A stage's ``reasons`` and the knee's ``summary``, ``confidence`` and ``capacity_text`` are
records in memory (:data:`analysis.model.Reason`, the summary, confidence and fit facts), and so
are a stage's ``bottleneck_reason`` and ``failures`` (:mod:`analysis.diagnosis.facts`), and so
are the deploy answer's ``text``, each recommendation's ``reason`` and each ``withheld`` note
(:mod:`analysis.advice.facts`); the file keeps them in words, written here by the report layer,
and reads them back as those words.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from analysis.advice.facts import DeployAnswer, Recommendation, Recommendations
from analysis.knee.facts import fact_from_dict
from analysis.model import PERCENTILE_METHOD, Baseline, KneeResult, Signal, StageVerdict, Standing
from analysis.report.advice_words import deploy_text, reason_text, withheld_text
from analysis.report.answer_view import answer_view
from analysis.report.diagnosis_words import bottleneck_text, failures_text
from analysis.report.knee_summary import confidence_words, fit_words, summary_words
from analysis.report.knee_words import signal_text
from analysis.report.rate_words import rate_knee_json, rate_records
from analysis.report.slo_words import slo_json
from analysis.report.stage_reasons import reasons_text
from analysis.report.stage_words import baseline_note_text, provisional_text
from analysis.slo.evaluate import SloResult
from analysis.stages.rate_stages import RateKnee

if TYPE_CHECKING:  # the pipeline imports the report layer
    from analysis.pipeline import Analysis

SCHEMA = 2
#: the schemas :func:`from_json` reads
READABLE_SCHEMAS = (1, 2)


def jsonable(value: Any) -> Any:
    """``value`` with NaN/inf → None, numpy → Python, tuples → lists, dataclasses → dicts."""
    if isinstance(value, Signal):  # its words as schema 1 wrote them, then what it measured
        return {
            "name": value.name,
            "fired": value.fired,
            "value": jsonable(value.value),
            "threshold": jsonable(value.threshold),
            "text": signal_text(value),
            "fact": jsonable(value.fact),
        }
    if isinstance(value, DeployAnswer):  # the answer in words, as schema 1 wrote it
        return {"users": jsonable(value.users), "bound": value.bound, "text": deploy_text(value)}
    if isinstance(value, Recommendations):
        return {
            "items": [
                {"key": i.key, "value": jsonable(i.value), "reason": reason_text(i)}
                for i in value.items
            ],
            "server_flags": list(value.server_flags),
            "withheld": [withheld_text(note) for note in value.withheld],
            "deploy": jsonable(value.deploy),
            "provisional": provisional_text(value.provisional),
            **({"cannot_tell": True} if value.cannot_tell else {}),
        }
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        words = _words(value)  # what the file keeps in words, written now from the facts
        return {
            f.name: words[f.name] if f.name in words else jsonable(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.metadata.get("json", True)  # a model's input kept out (e.g. a mix's records)
        }
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | np.ndarray):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    return value


def _words(value: Any) -> dict[str, Any]:
    """The fields knee.json writes in words (schema 1 and 2 alike): a stage's reasons,
    bottleneck reason and failures, the knee's summary, confidence and fit."""
    if isinstance(value, StageVerdict):
        return {
            "reasons": list(reasons_text(value)),
            "bottleneck_reason": bottleneck_text(value.bottleneck_reason),
            "failures": failures_text(value.failures),
        }
    if isinstance(value, Baseline):
        return {"warnings": [baseline_note_text(w) for w in value.warnings]}
    if isinstance(value, KneeResult):
        return {
            "summary": summary_words(value),
            "confidence": confidence_words(value),
            "capacity_text": fit_words(value),
        }
    return {}


def summary_records(summary: pd.DataFrame) -> list[dict[str, Any]]:
    return [jsonable(row) for row in summary.to_dict(orient="records")]


def to_json(
    summary: pd.DataFrame,
    knee: KneeResult | None,
    baseline: Baseline | None,
    recommendations: Recommendations | None,
    *,
    run_id: str = "",
    slo: SloResult | None = None,
    rate_stages: pd.DataFrame | None = None,
    rate_knee: RateKnee | None = None,
    workload: Mapping[str, Any] | None = None,
    standing: Standing | None = None,
) -> str:
    """The knee.json text (indented, strict JSON, a newline at the end); ``workload``: the
    prefix-cache, conversation and class sections (:mod:`analysis.report.workload`);
    ``standing``: written (as ``"standing"``) only when the answer is not whole."""
    document = {
        "schema": SCHEMA,
        "run_id": run_id,
        "percentile_method": PERCENTILE_METHOD,
        "knee": jsonable(knee),
        "baseline": jsonable(baseline),
        "recommendations": jsonable(recommendations),
        "summary": summary_records(summary),
    }
    if knee is not None:  # the answer's figures under their docs/method.md names
        document["answer"] = answer_view(knee, recommendations).as_json()
    if slo is not None:
        document["slo"] = jsonable(slo_json(slo))
    if rate_knee is not None:  # open-loop rate stages: the rate knee and max requests/s
        document["rate_knee"] = jsonable(rate_knee_json(rate_knee))
        stages = [] if rate_stages is None else summary_records(rate_records(rate_stages))
        document["rate_stages"] = stages
    if standing is not None and standing.kind != "answer":  # partial, or cannot tell
        document["standing"] = jsonable(standing)
    document.update(workload or {})
    return json.dumps(document, indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def analysis_json(
    analysis: Analysis, *, rates: bool = False, workload: Mapping[str, Any] | None = None
) -> str:
    """:func:`to_json` of an analysis; ``rates``: with its open-loop rate stages and rate knee
    (knee.json has them; ``--format json`` on stdout has not)."""
    return to_json(
        analysis.summary,
        analysis.knee,
        analysis.baseline,
        analysis.recommendations,
        run_id=analysis.run_id,
        slo=analysis.slo,
        rate_stages=analysis.rate_stages if rates else None,
        rate_knee=analysis.rate_knee if rates else None,
        workload=workload,
        standing=analysis.standing,
    )


@dataclasses.dataclass(frozen=True)
class KneeDocument:
    """A knee.json read back: the same objects the analysis produced."""

    run_id: str
    summary: pd.DataFrame
    knee: KneeResult | None
    baseline: Baseline | None
    recommendations: Recommendations | None
    slo: dict[str, Any] | None = None  # the SLO section as written, when there was one


def _nan(value: Any) -> Any:
    return math.nan if value is None else value


def _knee(data: dict[str, Any] | None) -> KneeResult | None:
    if data is None:
        return None
    stages = tuple(
        StageVerdict(
            **{
                **s,
                "reasons": tuple(s["reasons"]),
                "signals": tuple(_signal(sig) for sig in s["signals"]),
            }
        )
        for s in data["stages"]
    )
    return KneeResult(**{**data, "stages": stages})


def _signal(data: dict[str, Any]) -> Signal:
    """A signal read back: its fact where the file has one (schema 2), else its words."""
    fact = data.get("fact")
    return Signal(
        data["name"],
        data["fired"],
        data["value"],
        data["threshold"],
        said="" if fact else data.get("text", ""),
        fact=fact_from_dict(fact) if fact else None,
    )


def _baseline(data: dict[str, Any] | None) -> Baseline | None:
    if data is None:
        return None
    return Baseline(**{**data, "warnings": tuple(data.get("warnings", ()))})


def _recommendations(data: dict[str, Any] | None) -> Recommendations | None:
    if data is None:
        return None
    deploy = data.get("deploy")
    return Recommendations(
        items=tuple(Recommendation(**item) for item in data["items"]),
        server_flags=tuple(data["server_flags"]),
        withheld=tuple(data.get("withheld", ())),
        deploy=(
            DeployAnswer(deploy["users"], deploy["bound"], deploy["text"])
            if isinstance(deploy, dict)
            else None
        ),
        provisional=str(data.get("provisional", "")),
        cannot_tell=bool(data.get("cannot_tell", False)),
    )


def from_json(text: str) -> KneeDocument:
    """Rebuild the objects from knee.json text (null numbers in the summary come back as NaN)."""
    data = json.loads(text)
    if data.get("schema") not in READABLE_SCHEMAS:
        raise ValueError(
            f"knee.json schema {data.get('schema')!r} is not one of {READABLE_SCHEMAS}"
        )
    rows = [{k: _nan(v) for k, v in row.items()} for row in data["summary"]]
    return KneeDocument(
        run_id=data.get("run_id", ""),
        summary=pd.DataFrame(rows),
        knee=_knee(data["knee"]),
        baseline=_baseline(data["baseline"]),
        recommendations=_recommendations(data["recommendations"]),
        slo=data.get("slo"),
    )
