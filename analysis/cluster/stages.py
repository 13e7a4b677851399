"""The two stages a cluster file is built from — the watermark's and the knee's — and their gauges.

* **watermark stage**: the highest trusted step stage below the knee and at or below the
  production watermark's high end (``production_watermark`` of the recommendations,
  ``--watermark-low``–``--watermark-high`` of the base capacity, 70–80 % by default); without a
  base capacity (memory above the pressure threshold everywhere, say), the same shares of the
  capacity (``max_concurrency``) stand in (:func:`analysis.advice.recommend.watermark_band`
  with the shares the analysis used), and :attr:`Anchors.watermark_basis` says so; the lowest
  step stage when every one lies above it;
* **knee stage**: the answer's first stage past the capacity (:func:`answer`): the knee's
  stage; else the red line's; else none (the tested range never saturated, and each file says
  so).

Per stage the server's own gauges over the measured window: mean waiting and running requests,
mean and peak KV-cache use (%), from the canonical timeline
(:func:`analysis.inputs.server_metrics.canonical_timeline`); NaN without server metrics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pandas as pd

from analysis.advice.recommend import watermark_band
from analysis.cluster.memo import per_analysis
from analysis.pipeline import Analysis
from analysis.report.answer_view import AnswerView, answer_view
from analysis.stages.summary import measured_requests, stage_windows


@dataclass(frozen=True)
class StageGauges:
    """One stage's figures that a threshold can stand on (NaN: not measured)."""

    stage: int
    users: int
    waiting_mean: float
    running_mean: float
    kv_mean_pct: float
    kv_peak_pct: float
    e2e_p95_ms: float
    itl_p50_ms: float
    ttft_p95_ms: float
    #: the median over ok requests of each one's TPOT ((e2e − TTFT) / (completion tokens − 1))
    tpot_p50_ms: float
    #: the median over ok streamed requests of completion tokens ÷ content chunks: 1 where the
    #: server sends a token a chunk, more where it batches them (NaN: no chunk counted)
    tokens_per_chunk: float


@dataclass(frozen=True)
class Anchors:
    """The stages thresholds come from, and the baseline's latency the alerts compare with."""

    watermark: StageGauges | None
    knee: StageGauges | None
    knee_kind: str  # "knee" | "red line" | "" (none found)
    watermark_range: tuple[int, int] | None  # the recommended users range, e.g. (5, 6)
    baseline_e2e_p95_ms: float | None
    view: AnswerView  # the one answer (deploy, capacity, first stage past it) every output shows
    watermark_basis: str = "production_watermark"  # or what stood in for it


def records(frame: pd.DataFrame) -> list[Any]:
    """The rows of ``frame`` as objects with one attribute per column (values untyped)."""
    return [SimpleNamespace(**{str(k): v for k, v in r.items()}) for r in frame.to_dict("records")]


def _float(value: object) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan
    return number


@per_analysis
def measured_windows(analysis: Analysis) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The measured request rows (with ``cls``) and each stage's measured window
    (``window_start``/``window_end``, indexed by stage): what every cluster file reads."""
    measured = measured_requests(analysis.run)
    return measured, stage_windows(analysis.run, measured)


def tokens_per_chunk(measured: pd.DataFrame) -> pd.Series:
    """Per stage, the median over its ok rows with content chunks of completion tokens ÷ chunks
    (:func:`measured_windows`' rows; empty without the columns): how many tokens a stream chunk
    carried, which a chunk's gap (the ITL columns) holds the time of."""
    if not {"chunks", "completion_tokens"} <= set(measured.columns):
        return pd.Series(dtype=float)
    chunks = pd.to_numeric(measured["chunks"], errors="coerce")
    tokens = pd.to_numeric(measured["completion_tokens"], errors="coerce")
    keep = (measured["cls"] == "ok") & (chunks > 0) & tokens.notna()
    return (tokens[keep] / chunks[keep]).groupby(measured.loc[keep, "stage"]).median()


@per_analysis
def stage_gauges(analysis: Analysis) -> dict[int, StageGauges]:
    """Every stage's gauges, keyed by stage index."""
    measured, windows = measured_windows(analysis)
    per_chunk = tokens_per_chunk(measured)
    timeline = analysis.server_timeline
    out: dict[int, StageGauges] = {}
    for row in records(analysis.summary):
        stage = int(row.stage)
        gauges = {"waiting": math.nan, "running": math.nan, "kv": math.nan, "kv_peak": math.nan}
        if timeline is not None and stage in windows.index:
            start, end = windows.loc[stage, "window_start"], windows.loc[stage, "window_end"]
            ts = timeline["timestamp_unix_s"]
            rows = timeline[(ts >= start) & (ts <= end)]
            if not rows.empty:
                per = rows.groupby("endpoint")
                gauges = {
                    "waiting": float(per["requests_waiting"].mean().sum(min_count=1)),
                    "running": float(per["requests_running"].mean().sum(min_count=1)),
                    "kv": float(rows["kv_cache_usage_pct"].mean()),
                    "kv_peak": float(rows["kv_cache_usage_pct"].max()),
                }
        out[stage] = StageGauges(
            stage=stage,
            users=int(row.target_users),
            waiting_mean=gauges["waiting"],
            running_mean=gauges["running"],
            kv_mean_pct=gauges["kv"],
            kv_peak_pct=gauges["kv_peak"],
            e2e_p95_ms=_float(row.e2e_p95_ms),
            itl_p50_ms=_float(row.itl_p50_ms),
            ttft_p95_ms=_float(row.ttft_p95_ms),
            tpot_p50_ms=_float(row.tpot_p50_ms),
            tokens_per_chunk=_float(per_chunk.get(stage, math.nan)),
        )
    return out


@per_analysis
def answer(analysis: Analysis) -> AnswerView:
    """The run's one answer (:func:`analysis.report.answer_view.answer_view`): every cluster file
    takes its deploy figure, capacity and first stage past it from here, as the screen does."""
    return answer_view(analysis.knee, analysis.recommendations)


@per_analysis
def anchors(analysis: Analysis) -> Anchors:
    """The watermark's and the knee's stages of one analysed run (see the module docstring)."""
    gauges = stage_gauges(analysis)
    knee = analysis.knee
    view = answer(analysis)
    steps = sorted(
        (v for v in knee.stages if v.verdict != "insufficient_data"),
        key=lambda v: (v.target_users, v.stage),
    )
    watermark = analysis.recommendations.get("production_watermark")
    band = (
        (int(watermark[0]), int(watermark[1]))
        if isinstance(watermark, list | tuple) and len(watermark) == 2
        else None
    )
    basis = "production_watermark"
    if band is None and view.capacity:
        p = analysis.recommend_params
        band = watermark_band(view.capacity, p)
        shares = f"{p.watermark_low * 100:g}-{p.watermark_high * 100:g} %"
        basis = f"no base capacity: {shares} of the capacity {view.capacity} stands in"
    # the first stage past the capacity, the answer's: the knee stage, else the red line
    kind = view.past or ""
    knee_stage = {"knee": knee.knee_stage, "red line": knee.red_line_stage}.get(kind)
    knee_users = next((v.target_users for v in steps if v.stage == knee_stage), None)
    below = [
        v
        for v in steps
        if v.trusted
        and (band is None or v.target_users <= band[1])
        and (knee_users is None or v.target_users < knee_users)
    ]
    mark = below[-1] if below else (steps[0] if steps else None)
    base = analysis.baseline
    return Anchors(
        watermark=gauges.get(mark.stage) if mark is not None else None,
        knee=gauges.get(knee_stage) if knee_stage is not None else None,
        knee_kind=kind,
        watermark_range=band,
        watermark_basis=basis,
        baseline_e2e_p95_ms=base.e2e_p95_ms,
        view=view,
    )


def frame(gauges: dict[int, StageGauges]) -> pd.DataFrame:
    """The gauges as a frame, one row per stage (for tests and the report)."""
    return pd.DataFrame([g.__dict__ for g in gauges.values()])
