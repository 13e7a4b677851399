"""Run directory → every analysis object: load, summary, baseline, knee, diagnosis, advice.

One function, :func:`analyze_run`, shared by ``loadknee analyze`` and ``loadknee compare`` so that
both see exactly the same numbers. It prints nothing; long steps are announced through the
optional ``progress`` callback (the CLI sends them to stderr).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.advice.engine import KV_POOL_KEY, RUN_INFO_KEY, detect_engine
from analysis.advice.facts import Recommendations
from analysis.advice.recommend import RecommendParams, recommend
from analysis.advice.standing import answer_standing
from analysis.diagnosis.bottleneck import diagnose
from analysis.diagnosis.failure_mix import failure_mixes, name_failures
from analysis.diagnosis.failures import overloaded_stages
from analysis.inputs.cache_config import kv_pool_tokens
from analysis.inputs.load import Run, read_run
from analysis.inputs.nvsmi import read_nvidia_smi_csv
from analysis.inputs.server_metrics import canonical_timeline
from analysis.knee.confidence import knee_confidence
from analysis.knee.find import find_knee, resolve_tail_metric
from analysis.knee.late_client import late_baseline
from analysis.model import Baseline, FaultReason, KneeResult, RowCoverage, StageVerdict, Standing
from analysis.report.advice_yaml import to_yaml
from analysis.report.standing import with_yaml_note
from analysis.slo.advice import with_slo
from analysis.slo.evaluate import SloResult, evaluate_slos
from analysis.stages.baseline import compute_baseline
from analysis.stages.coverage import row_coverage
from analysis.stages.intervals import IntervalParams
from analysis.stages.rate_stages import RateKnee, run_rates
from analysis.stages.run_cut import run_cut
from analysis.stages.summary import measured_requests, run_batches, summarize_stages
from loadknee_core.knee_params import KneeOverride, KneeParams, overrides, run_knee_params
from loadknee_core.slo_targets import METRIC_COLUMNS, SloParams, run_slo_params

Progress = Callable[[str], None]

#: the request columns read from the measured rows here (the summary and its windows, the
#: baseline, the coverage, the failure mixes, the SLOs): only these are copied with the rows
MEASURED_COLUMNS: tuple[str, ...] = (
    "stage",
    "start_unix_s",
    "end_unix_s",
    "e2e_ms",
    "ttft_ms",
    "tpot_ms",
    "itl_p50_ms",
    "itl_p95_ms",
    "prompt_tokens",
    "completion_tokens",
    "resent",
    "outcome",
    "http_status",
    "error",
    *METRIC_COLUMNS.values(),
)


@dataclass(frozen=True)
class Analysis:
    """Everything known about one run after analysis; the report writers read only this."""

    run: Run
    summary: pd.DataFrame
    baseline: Baseline
    knee: KneeResult
    recommendations: Recommendations
    recommendations_yaml: str
    server_timeline: pd.DataFrame | None  # canonical per-sample server gauges, None if absent
    slo: SloResult | None = None  # the SLO verdicts and capacity, None when no SLO was given
    rate_stages: pd.DataFrame | None = None  # open-loop rate stages (analysis.stages.rate_stages)
    rate_knee: RateKnee | None = None
    knee_params: KneeParams = field(default_factory=KneeParams)  # the thresholds judged with
    #: the margins the settings were given with (the watermark's shares, ...)
    recommend_params: RecommendParams = field(default_factory=RecommendParams)
    #: the thresholds given on the command line that differ from the run's recorded ones
    knee_overrides: tuple[KneeOverride, ...] = ()
    #: what the answer stands on: whole, the judged stages only, or "cannot tell" (exit 3)
    standing: Standing = field(default_factory=Standing)

    @property
    def run_id(self) -> str:
        return str(self.run.run_info.get("run_id") or self.run.path.name)


def server_timeline(server_metrics: pd.DataFrame) -> pd.DataFrame | None:
    """The canonical server timeline (KV %, running, waiting, preemptions), None when no data."""
    if server_metrics.empty:
        return None
    timeline = canonical_timeline(server_metrics)
    return None if timeline.empty else timeline


def with_unjudged(knee: KneeResult, coverage: RowCoverage, stages: pd.DataFrame) -> KneeResult:
    """``knee`` (judged without the stages whose rows disagree with stages.csv) with those
    stages back in as "insufficient data", each with why, and its summary saying so."""
    if not coverage.faults:
        return knee
    opens = dict(
        zip(
            stages["stage"].astype(int),
            stages["warmup_end_unix_s"].fillna(stages["start_unix_s"]).astype(float),
            strict=True,
        )
    )
    end = coverage.rows_end_unix_s
    added = [
        StageVerdict(
            stage=f.stage,
            target_users=f.target_users,
            verdict="insufficient_data",
            reasons=(FaultReason(f, end, opens.get(f.stage)),),
            signals=(),
        )
        for f in coverage.faults
    ]
    verdicts = sorted((*knee.stages, *added), key=lambda v: (v.target_users, v.stage))
    summary = knee.summary
    if isinstance(summary, str):
        pass  # words already written (never from find_knee)
    elif any(v.verdict != "insufficient_data" for v in verdicts):  # the summary names them
        summary = replace(
            summary, missing_rows_users=tuple(sorted(f.target_users for f in coverage.faults))
        )
    else:  # no stage judged: the summary gives the lowest stage's reason
        summary = replace(
            summary,
            stages=len(verdicts),
            lacking_users=tuple(v.target_users for v in verdicts),
            first_lacking=verdicts[0].reasons[0] if verdicts[0].reasons else None,
        )
    return replace(knee, stages=tuple(verdicts), summary=summary)


def analyze_run(
    run_dir: str | Path,
    *,
    nvidia_smi_csv: str | Path | None = None,
    nvidia_smi_tz: str | None = None,
    knee_params: KneeParams | None = None,
    knee_overrides: Mapping[str, Any] | None = None,
    recommend_params: RecommendParams | None = None,
    slo_params: SloParams | None = None,
    progress: Progress | None = None,
) -> Analysis:
    """Read and analyse one run directory (raises :class:`~analysis.inputs.load.RunDirError`).

    ``nvidia_smi_tz`` is the zone of the GPU host that wrote ``nvidia_smi_csv`` (its timestamps
    carry none; default: this machine's zone; see :mod:`analysis.inputs.nvsmi`).
    The knee's thresholds: ``knee_params`` when given, else the ones the run recorded
    (:func:`~loadknee_core.knee_params.run_knee_params`) with ``knee_overrides``
    (``{field: value}``, the flags typed) on top; ``Analysis.knee_overrides`` are the overrides
    that differ.
    """
    say = progress or (lambda _msg: None)
    say(f"reading {run_dir}")
    run = read_run(
        run_dir,
        nvidia_smi_csv=nvidia_smi_csv,
        read_nvidia_smi=partial(read_nvidia_smi_csv, tz=nvidia_smi_tz),
    )
    say(f"summarising {len(run.stages)} stages, {len(run.requests):,} requests")
    measured = measured_requests(run, MEASURED_COLUMNS)
    batches = run_batches(run, measured=measured)
    # the server's gauges once: the record table's figures and the report's timeline
    timeline = server_timeline(run.server_metrics)
    recorded = run_knee_params(run.run_info)
    chosen = knee_params or replace(recorded, **(knee_overrides or {}))
    summary = summarize_stages(
        run,
        measured=measured,
        batches=batches,
        timeline=None if timeline is None else (lambda _metrics: timeline),
        # the window a stage would need for the knee's interval target
        intervals=IntervalParams(target_pct=chosen.target_interval_pct),
    )
    baseline = compute_baseline(run, summary, measured=measured)
    params = resolve_tail_metric(chosen, run.run_info, baseline)
    # stages whose rows disagree with stages.csv (a cut or incomplete requests.csv) are judged
    # by nothing: the knee, its fit and its resamples see only the others
    coverage = row_coverage(run.stages, run.requests, measured, cut_files=run.cut_files)
    judged = summary[~summary["stage"].isin(coverage.faulted)] if coverage.faults else summary
    knee = find_knee(judged, baseline, params=params)
    say("resampling the stages' time windows for the knee's confidence")
    knee = knee_confidence(judged, baseline, knee, batches, params=params)
    knee = with_unjudged(knee, coverage, run.stages)
    # a step of its own, or the benchmark (and CI's slowest step) would book it as resampling
    say("diagnosing and advising: failures, bottlenecks, SLOs, rates")
    mixes = failure_mixes(measured)
    knee = name_failures(diagnose(summary, knee, baseline, failures=mixes), mixes)
    info = {
        **run.run_info,
        RUN_INFO_KEY: detect_engine(run.server_metrics, run.run_info),
        KV_POOL_KEY: kv_pool_tokens(run.server_metrics),
    }
    recs = recommend(summary, knee, baseline, run_info=info, params=recommend_params)
    if slo_params is None or not slo_params.given:  # the targets the sweep was run with, if any
        slo_params = run_slo_params(run.run_info)
    slo = evaluate_slos(summary, knee, params=slo_params, measured=measured)
    recs = with_slo(recs, slo, knee, recommend_params)
    rated = run_rates(run, summary, baseline=baseline, slo=slo, knee=params)
    cut = run_cut(run.run_info, run.stages)
    if cut is not None:
        recs = replace(recs, provisional=cut)
    overloaded = overloaded_stages(summary, run.run_info)
    standing = answer_standing(
        knee, recs.deploy, coverage, late_baseline(summary, baseline), overloaded
    )
    if standing.cannot_tell:  # nothing is recommended from an answer that is not one
        recs = Recommendations(
            items=(), server_flags=(), provisional=recs.provisional, cannot_tell=True
        )
    recs_yaml = with_yaml_note(to_yaml(recs, knee), standing, knee)
    return Analysis(
        run=run,
        summary=summary,
        baseline=baseline,
        knee=knee,
        recommendations=recs,
        recommendations_yaml=recs_yaml,
        server_timeline=timeline,
        slo=slo,
        rate_stages=None if rated is None else rated[0],
        rate_knee=None if rated is None else rated[1],
        knee_params=chosen,
        recommend_params=recommend_params or RecommendParams(),
        knee_overrides=() if knee_params else overrides(recorded, chosen),
        standing=standing,
    )
