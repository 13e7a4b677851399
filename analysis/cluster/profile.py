"""The latency profile an autoscaler's queueing model reads: TPOT = α + β × batch, TTFT vs prompt.

**Decode** (one point per judged stage with ok streamed requests, the baseline's included, but
none whose load generator ran late: its ITL is the client's; docs/method.md, Late load generator):
``x`` the running batch — the server's mean ``requests_running`` over the measured window, or
without server metrics the stage's users capped at the slots the server showed
(``KneeResult.server_slots``), else its users, for the stages below the knee only (past it the
batch is unknown) — and ``y`` one of two figures (:data:`Figure`):

* ``mean_token`` (``latency-profile.yaml``, for an autoscaler's queueing model): the stage's
  median TPOT, a request's (e2e − TTFT) / (tokens − 1) from its usage counts: the mean time a
  token took, the steps that also ran a newcomer's prefill included — what a queue model's time
  per token is, and steady where the chunk gaps are not: the simulator under CPU contention runs
  its late steps back to back, and its median gap drifts under its step at the larger batches
  (β 0.87–0.94 on the gap, 1.01–1.03 on TPOT, for a true 1.0 plus its 64-token prefills'
  0.04: the e2e suite's cluster sweep, in two CI runs, quiet and beside two CPU hogs; its
  timer overshoot also lifts the gap at one sequence, +0.3 ms).
* ``engine_step`` (the what-if model, :mod:`analysis.predict.fit`, which adds the prefills
  itself): the stage's median ITL (``itl_p50_ms``: the median is one engine step; the mean would
  carry the steps that also prefilled a newcomer). Where the streams carried several tokens a
  chunk (:data:`CHUNKED_TOKENS`; :func:`decode_step`), a chunk's gap is several tokens' time and
  ``y`` is each stage's median TPOT instead (``step_source``); a stage whose tokens came in
  bursts is left out (:func:`bursty_stages`), and so, whatever the figure, is one that served
  well under what a stage running no more did (:func:`starved_stages`).

Where some stage has no TPOT, ``mean_token`` falls back to the engine step. Ordinary least
squares; 95 % intervals on α and β from Student's t with n − 2 degrees of freedom; the residual
of every stage is written beside it. With fewer than three stages, or no spread in the batch,
nothing is fitted and the file says why.

**Prefill** (per request, ok streamed requests of the stages before the knee, where requests do
not wait for a slot): TTFT = γ + δ × prompt tokens, the same way. Fixed-length prompts give no
spread: then only the mean TTFT is written, with that reason.

The **saturation batch** is the most the server ran at once (``server_slots``), else the knee
stage's mean running batch, else the running batch of the highest stage: past it extra requests
only wait, which is what the autoscaler's queue model needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from analysis.cluster.stages import answer, measured_windows, records, stage_gauges
from analysis.cluster.yamlblock import Commented, dump
from analysis.knee.late_client import late_client_fact
from analysis.pipeline import Analysis
from analysis.report.answer_view import answer_note
from analysis.report.predict_words import MEAN_TOKEN_WORDS, decode_source_text

#: the median tokens a stream chunk carried (:attr:`StageGauges.tokens_per_chunk`) above which a
#: chunk's gap is no step: a server that sends a token a chunk reads 1 (a chunk now and then
#: holding two, a character split across tokens or a stop string held back, moves the mean, not
#: the median), one that batches them (vLLM's ``--stream-interval``, TGI, a gateway, the refusing
#: test server's 8 chunks) 2 or more: halfway between
CHUNKED_TOKENS = 1.5

#: a stage whose median chunk gap is under this share of its time per token delivered its tokens
#: in bursts (:func:`bursty_stages`): 0.7, where a steady stream reads 0.85-1.0 and bursty stages
#: read 0.41 and 0.56 (0.5 let the 0.56 one through: fresh #40)
BURSTY_GAP_SHARE = 0.7

#: a stage that served less than this share of what a stage with no more running served had its
#: server starved (:func:`starved_stages`)
STARVED_SHARE = 0.85

#: the per-token figure the decode line is fitted on: the median ITL, or the median TPOT where
#: the streams carried several tokens a chunk
StepSource = Literal["itl", "tpot"]

#: what the decode line's ``y`` is (module docstring): the mean time per token (TPOT), for a
#: queueing model, or the bare engine step (the median gap), for a model that adds prefills
Figure = Literal["mean_token", "engine_step"]

#: two-sided 95 % Student t quantiles, df 1..30 (beyond: 1.96)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip


def t975(df: int) -> float:
    return _T975[df - 1] if 1 <= df <= len(_T975) else 1.96


@dataclass(frozen=True)
class LineFit:
    """``y = intercept + slope × x`` with 95 % intervals (None: not fitted, see ``why``)."""

    intercept: float | None
    slope: float | None
    intercept_ci: tuple[float, float] | None
    slope_ci: tuple[float, float] | None
    r2: float | None
    points: int
    residuals: tuple[float, ...] = ()
    why: str = ""
    #: fitted, or why not: too few points, or every x the same (no slope to find)
    kind: Literal["fitted", "too-few-points", "no-spread"] = "fitted"


def fit_line(x: np.ndarray, y: np.ndarray, *, min_points: int = 3) -> LineFit:
    """Ordinary least squares of ``y`` on ``x`` with t intervals (NaN pairs dropped)."""
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    n = len(x)
    if n < min_points:
        why = f"{n} points; {min_points} needed"
        return LineFit(None, None, None, None, None, n, why=why, kind="too-few-points")
    sxx = float(((x - x.mean()) ** 2).sum())
    if sxx <= 1e-12 * max(1.0, float((x**2).sum())):
        why = "no spread in x: the slope is unknown"
        return LineFit(None, None, None, None, None, n, why=why, kind="no-spread")
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / sxx)
    intercept = float(y.mean() - slope * x.mean())
    residuals = y - (intercept + slope * x)
    sse = float((residuals**2).sum())
    sst = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - sse / sst if sst > 0 else 1.0
    slope_ci: tuple[float, float] | None
    int_ci: tuple[float, float] | None
    if n > 2:
        s2 = sse / (n - 2)
        t = t975(n - 2)
        se_slope = math.sqrt(s2 / sxx)
        se_int = math.sqrt(s2 * (1.0 / n + x.mean() ** 2 / sxx))
        slope_ci = (slope - t * se_slope, slope + t * se_slope)
        int_ci = (intercept - t * se_int, intercept + t * se_int)
    else:
        slope_ci = int_ci = None
    return LineFit(intercept, slope, int_ci, slope_ci, r2, n, tuple(map(float, residuals)))


@dataclass(frozen=True)
class Profile:
    """The fitted decode and prefill lines and the saturation batch."""

    decode: LineFit
    #: stage, users, batch, itl_p50_ms, tpot_p50_ms, tokens_per_chunk, residual_ms
    decode_points: pd.DataFrame
    batch_source: str  # "server running gauge" | "users capped at the server's slots" | "users"
    prefill: LineFit
    ttft_mean_ms: float | None
    saturation_batch: float | None
    saturation_source: str
    step_source: StepSource = "itl"  # the column of decode_points the line was fitted on
    tokens_per_chunk: float | None = None  # the most a decode stage's chunks carried
    bursty_stages: tuple[int, ...] = ()  # left out of the line: tokens came in bursts
    figure: Figure = "mean_token"  # what the line's y is (the step source says which column)
    starved_stages: tuple[int, ...] = ()  # left out of the line: served less at a larger batch


def late_stages(analysis: Analysis) -> set[int]:
    """The stages (the baseline's too) whose load generator ran late: their latencies are the
    client's, not the server's (docs/method.md: Late load generator), so no fit reads them."""
    facts = [(row, late_client_fact(row)) for row in analysis.summary.to_dict(orient="records")]
    return {int(row["stage"]) for row, fact in facts if fact is not None and fact.late}


def decode_points(analysis: Analysis) -> tuple[pd.DataFrame, str]:
    """One row per judged stage whose load generator was on time: its running batch, median ITL
    and TPOT, and the tokens its stream chunks carried (:func:`decode_step` picks the figure)."""
    gauges = stage_gauges(analysis)
    judged = {v.stage for v in analysis.knee.stages if v.verdict != "insufficient_data"}
    judged |= set(analysis.summary.loc[analysis.summary["kind"] == "baseline", "stage"].astype(int))
    judged -= late_stages(analysis)
    slots = analysis.knee.server_slots
    rows = []
    summary = analysis.summary
    served = dict(zip(summary["stage"].astype(int), summary["output_tok_s"], strict=True))
    server = any(not math.isnan(g.running_mean) for g in gauges.values())
    knee_users = answer(analysis).past_users  # the first stage past the capacity
    for stage, g in sorted(gauges.items()):
        if stage not in judged or math.isnan(g.itl_p50_ms):
            continue
        if server:
            batch = g.running_mean
        elif slots:
            batch = float(min(g.users, slots))
        elif knee_users is None or g.users < knee_users:
            batch = float(g.users)  # below the knee every user's request runs
        else:
            continue  # past the knee, without the server's gauge: the batch is unknown
        rows.append(
            {
                "stage": stage,
                "users": g.users,
                "batch": batch,
                "itl_p50_ms": g.itl_p50_ms,
                "tpot_p50_ms": g.tpot_p50_ms,
                "tokens_per_chunk": g.tokens_per_chunk,
                "output_tok_s": served.get(stage, math.nan),
            }
        )
    source = (
        "server running gauge"
        if server
        else ("users capped at the server's slots" if slots else "users")
    )
    columns = ["stage", "users", "batch", "itl_p50_ms", "tpot_p50_ms", "tokens_per_chunk",
               "output_tok_s"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns), source


def decode_step(points: pd.DataFrame) -> tuple[StepSource, float | None]:
    """The per-token figure the decode line is fitted on, and the most tokens a decode stage's
    chunks carried (None: no chunk counted).

    The median ITL where every stage's streams carried about a token a chunk; the median TPOT
    at every stage where any carried more than :data:`CHUNKED_TOKENS`. A chunk's gap is then
    ``k`` tokens' time, and the model would read it as one token's step (the recorded
    refusing-server runs, 8 tokens a chunk, missed their own 1-user median e2e by +548 to
    +623 % on the chunk gap, by −10 to +2 % on TPOT).
    One figure along the whole line: a server that batches its chunks only under load (a slow
    reader's outputs merged) would otherwise have chunk gaps read as steps exactly where the
    slope is read; at a stage of one token a chunk TPOT is about the mean gap, so switching
    there only adds back the steps that prefilled a newcomer, which the median leaves out. TPOT
    spreads the first chunk's other ``k − 1`` tokens over the rest (``(n − k) / (n − 1)`` of a
    step: 0.89 at 64 tokens, 8 a chunk) and TTFT holds their time, which is where the model's
    prefill is read from (:mod:`analysis.predict.fit`), so TTFT + (n − 1) × TPOT is the run's
    e2e.
    """
    carried = pd.to_numeric(points["tokens_per_chunk"], errors="coerce").dropna()
    most = float(carried.max()) if len(carried) else None
    return ("tpot" if most is not None and most > CHUNKED_TOKENS else "itl"), most


def _prefill(analysis: Analysis) -> tuple[LineFit, float | None]:
    measured = measured_windows(analysis)[0]
    knee_users = answer(analysis).past_users  # the first stage past the capacity
    late = late_stages(analysis)
    stages = [
        v.stage
        for v in analysis.knee.stages
        if v.verdict != "insufficient_data"
        and (knee_users is None or v.target_users < knee_users)
        and v.stage not in late
    ]
    rows = measured[(measured["cls"] == "ok") & measured["stage"].isin(stages)]
    x = pd.to_numeric(rows["prompt_tokens"], errors="coerce").to_numpy(dtype=float)
    y = pd.to_numeric(rows["ttft_ms"], errors="coerce").to_numpy(dtype=float)
    known = y[~np.isnan(y)]
    mean = float(known.mean()) if len(known) else None
    return fit_line(x, y), mean


def bursty_stages(points: pd.DataFrame) -> tuple[int, ...]:
    """The stages whose median gap between chunks is under :data:`BURSTY_GAP_SHARE` of their
    time per token (TPOT, from the usage counts): their tokens came in bursts, so the gap is no
    engine step.

    Why: a server that falls behind and catches up (a starved process running its late steps
    back to back, a CPU engine flushing its buffer) delivers several tokens within a moment;
    the median gap then reads a fraction of a step (6.6 ms at a stage whose tokens took 16.0 ms
    each, on the 10 ms-step simulator beside a CPU hog; 8.9 ms against 15.7 ms on a fresh
    machine), and one such stage tilts the line (β 0.82 and 0.85 for the simulator's 1.0). On
    a steady stream the median gap is about the time per token (the steps that also prefilled
    a newcomer lift only TPOT): 0.85–1.0 of it."""
    gap = pd.to_numeric(points["itl_p50_ms"], errors="coerce")
    per_token = pd.to_numeric(points["tpot_p50_ms"], errors="coerce")
    bursty = gap < BURSTY_GAP_SHARE * per_token  # NaN on either side: not bursty
    return tuple(int(s) for s in points.loc[bursty, "stage"])


def starved_stages(points: pd.DataFrame) -> tuple[int, ...]:
    """The stages that served under :data:`STARVED_SHARE` of the output tok/s of a stage that
    ran no more at once: their server waited for CPU, so their time per token is the machine's.

    Why: an engine that runs out of slots, KV or compute stops gaining throughput; at the same
    batch it does not lose half of it. The 8-slot simulator in the e2e suite's cluster sweep on
    a busy CI machine served 426 tok/s at 8 users (7.5 running) and 200 at 12 (8 running), its
    TPOT 24.8 ms where its step is 18: that one stage tilted the line to α 8.4, β 1.60 for the
    simulator's 10 and 1.0."""
    rate = pd.to_numeric(points["output_tok_s"], errors="coerce").to_numpy(dtype=float)
    batch = points["batch"].to_numpy(dtype=float)
    out = []
    for i, stage in enumerate(points["stage"]):
        fewer = (batch <= batch[i]) & ~np.isnan(rate)
        if not np.isnan(rate[i]) and fewer.any() and rate[i] < STARVED_SHARE * rate[fewer].max():
            out.append(int(stage))
    return tuple(out)


def fit_profile(analysis: Analysis, figure: Figure = "mean_token") -> Profile:
    """The profile of one analysed run, its decode line on ``figure`` (the module docstring)."""
    points, source = decode_points(analysis)
    step_source, per_chunk = decode_step(points)
    tpot = pd.to_numeric(points["tpot_p50_ms"], errors="coerce")
    if figure == "mean_token" and len(points) and tpot.notna().all():
        step_source = "tpot"
    bursty = bursty_stages(points) if step_source == "itl" else ()
    starved = tuple(s for s in starved_stages(points) if s not in bursty)
    points = points[~points["stage"].isin((*bursty, *starved))].reset_index(drop=True)
    fit = fit_line(
        points["batch"].to_numpy(dtype=float),
        points[f"{step_source}_p50_ms"].to_numpy(dtype=float),
    )
    if fit.residuals and len(fit.residuals) == len(points):
        points = points.assign(residual_ms=list(fit.residuals))
    prefill, ttft_mean = _prefill(analysis)
    gauges = stage_gauges(analysis)
    if analysis.knee.server_slots:
        sat, sat_source = float(analysis.knee.server_slots), "the most the server ran at once"
    elif analysis.knee.knee_stage is not None and not math.isnan(
        gauges[analysis.knee.knee_stage].running_mean
    ):
        sat = gauges[analysis.knee.knee_stage].running_mean
        sat_source = "the knee stage's mean running batch"
    elif len(points):
        sat, sat_source = float(points["batch"].max()), "the highest stage's batch (no knee)"
    else:
        sat, sat_source = None, "no stage measured"
    return Profile(
        fit,
        points,
        source,
        prefill,
        ttft_mean,
        sat,
        sat_source,
        step_source,
        per_chunk,
        bursty,
        figure,
        starved,
    )


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _ci(pair: tuple[float, float] | None) -> list[float | None]:
    return [None, None] if pair is None else [_r(pair[0]), _r(pair[1])]


def profile_yaml(analysis: Analysis) -> str:
    """The profile as YAML: decode α/β with intervals and residuals, prefill, saturation batch."""
    prof = fit_profile(analysis)
    d, pf = prof.decode, prof.prefill
    step = f"{prof.step_source}_p50_ms"
    line = f"{prof.step_source.upper()} = alpha + beta × running batch (ms)"
    decode = {
        "alpha_ms": Commented(_r(d.intercept), (line,)),
        "alpha_ci95_ms": _ci(d.intercept_ci),
        "beta_ms_per_seq": _r(d.slope),
        "beta_ci95_ms_per_seq": _ci(d.slope_ci),
        "r2": _r(d.r2),
        "batch_from": prof.batch_source,
        "step_from": (
            MEAN_TOKEN_WORDS
            if prof.step_source == "tpot" and prof.figure == "mean_token"
            else decode_source_text(prof.step_source, prof.tokens_per_chunk)
        ),
        # stages whose tokens came in bursts (median gap under BURSTY_GAP_SHARE of their TPOT)
        **({"left_out_bursty_stages": list(prof.bursty_stages)} if prof.bursty_stages else {}),
        # stages that served under STARVED_SHARE of what a stage running no more did
        **({"left_out_starved_stages": list(prof.starved_stages)} if prof.starved_stages else {}),
        "stages": [
            {
                "stage": int(row.stage),
                "users": int(row.users),
                "batch": _r(float(row.batch), 3),
                step: _r(float(getattr(row, step)), 3),
                "residual_ms": _r(float(getattr(row, "residual_ms", math.nan)), 3),
            }
            for row in records(prof.decode_points)
        ],
    }
    if d.why:
        decode = {"not_fitted": d.why, **decode}
    prefill = {
        "gamma_ms": Commented(_r(pf.intercept), ("TTFT = gamma + delta × prompt tokens (ms)",)),
        "gamma_ci95_ms": _ci(pf.intercept_ci),
        "delta_ms_per_token": _r(pf.slope, 6),
        "delta_ci95_ms_per_token": _ci(pf.slope_ci),
        "requests": pf.points,
        "ttft_mean_ms": _r(prof.ttft_mean_ms, 3),
    }
    if pf.why:
        prefill = {"not_fitted": pf.why, **prefill}
    doc = {
        "run_id": analysis.run_id,
        "decode": decode,
        "prefill": prefill,
        "saturation_batch": Commented(_r(prof.saturation_batch, 3), (prof.saturation_source,)),
    }
    return dump(
        doc,
        header=[
            f"loadknee latency profile for run {analysis.run_id}: the decode and prefill lines "
            "fitted over the measured stages (95 % intervals; residuals per stage).",
            answer_note(answer(analysis)),
        ],
    )
