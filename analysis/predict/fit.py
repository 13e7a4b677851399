"""Fit the capacity model's parameters from one analysed run (:class:`~.facts.CapacityFit`).

* **Decode step** α + β × batch: the latency profile's line through the bare engine step
  (:func:`analysis.cluster.profile.fit_profile`, ``engine_step``; ``latency-profile.yaml``
  holds the mean time per token instead, prefills included, which this model adds itself),
  with its 95 % intervals: on the stages' median ITL, or their median TPOT where the streams
  carried several tokens a chunk (``tpot``: :func:`analysis.cluster.profile.decode_step`).
  A run that streamed no tokens (no inter-token latency) fits the same line on each stage's
  median e2e over its completion tokens, at the stages where no request waited (the server's
  running batch within half a request of the users, or without a gauge the stages below the
  knee): ``e2e_per_token``; the prefill then rides inside the step (``in_step``, γ = 0).
* **Prefill cost per prompt token** γ: where the prompts' lengths varied, the profile's line
  through TTFT against prompt tokens (its slope and interval: ``ttft_fit``); where they did not,
  the line of wall ms against prompt tokens through the single-request prefill probes the client
  timed at a few lengths before the sweep (run.json's ``prompt_source.prefill_probes``, at least
  3 at 2 or more lengths: ``probe_fit``; each probe asks one token, so its time is the prefill
  plus a constant the slope leaves out; at 4 or more lengths the line goes through each length's
  fastest probe, :func:`fastest_per_length`); else an assumption (``baseline_assumed``): the
  baseline's median TTFT less one decode step at batch 1, over its prompt tokens; its interval
  from α + β's.
* **Slot limit**: the server's running maximum while requests waited
  (``KneeResult.server_slots``, ``server_gauge``), else the slot count the engine itself
  reported at pre-flight (run.json's ``server.slots``: llama-server's ``/props``; ``engine``;
  it bound the run only where the run's capacity reached it), else the slot limit the
  concurrency probe saw before the sweep (``probe``: the same count streamed at once at the
  run's prompt and at twice it, :mod:`analysis.predict.limits_probe`), else the client-side estimate
  (``KneeResult.client_slots``, ``client_estimate``); else, where the knee came with the
  throughput flattened, the batch the decode line needs to give the plateau's throughput (the
  median output rate of the knee stage and those above it: ``1000 b / (α + β b) = X``, so
  ``b = X α / (1000 − X β)``, rounded down — a full server's slots run without the gaps a
  client leaves, so b over-reads — and never below the run's own capacity:
  ``throughput_plateau``, assumed); else none seen.
* **KV budget** in tokens: at each judged stage with a KV gauge, the mean running batch × the
  mean context a running sequence holds (prompt + half the completion) ÷ the gauge's mean
  share; the value is the stage where the gauge read highest (the most precise), the interval
  the spread over the stages that read at least half as high (``kv_gauge``; the prediction then
  judges memory on the use it predicts from that same context). Without a gauge,
  the concurrency probe's: where fewer streamed at once at twice the prompt, the budgets that
  hold those counts (``probe``); where it saw a slot limit or no limit, none (``probe_unseen``:
  it held its burst at twice the prompt). Without either,
  where a hard limit (slots) bound the run: the batch where the knee sat × prompt + completion
  (``knee_assumed``: the run cannot tell slots from KV) — but none for an engine that admits by
  slot alone (``per_slot``, :data:`SLOT_ADMITTING`: llama-server, whose slots each hold their
  own context), where a longer context never means fewer running sequences.
* **Stated limits**: the engine's own settings, where the user gives them (``loadknee predict
  --slots N --kv-tokens N``: vLLM's ``--max-num-seqs`` and the "GPU KV cache size: N tokens"
  of its start-up log, llama-server's ``--parallel``, SGLang's ``--max-running-requests`` and
  ``max_total_num_tokens``), take the place of what the run read or assumed (``stated``). Why:
  without ``/metrics`` a run of one length cannot tell its slot limit from a KV budget full at
  the same batch (the two give the same rows), and a what-if at longer contexts turns on which
  it was; the user often knows. The KV budget assumed from the knee still uses the batch the run
  measured, not the stated slots.
* **What bound the run**: ``kv`` where the KV gauge at the knee stage reached the memory
  pressure threshold (``KneeParams.memory_pressure_pct``) or the KV budget holds no more
  sequences of the run's lengths than the slot limit (× 1.1), ``slots`` where the server or the
  client saw a running limit, ``compute`` where the knee came without one (the step grew with
  the batch), ``none`` where no stage reached a knee. Where KV bound the run, the running
  maximum was the KV budget's doing, so no separate slot limit is kept.
* **A run that cannot tell** (``Standing.cannot_tell``: exit 3 from ``loadknee analyze``): the
  fit is made all the same (its decode line is the run's), but it keeps no measured capacity
  and carries the reason; :func:`~analysis.predict.whatif.predict` refuses a number from it,
  since the slot limit and the KV budget above lean on the very answer the run could not give.
* **The step's shape**: each measured batch's median offset from the decode line
  (``step_offsets``), kept for a step that is no straight line; the model runs it where it
  reproduces the run's own latency better than the line
  (:func:`analysis.predict.whatif.best_reproducing`).
* **The run's own latency**: the median e2e of each judged step and refine level
  (``measured_e2e_ms``), which :mod:`analysis.predict.insample` holds the model against.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis.advice.engine import detect_engine
from analysis.cluster.profile import LineFit, fit_line, fit_profile
from analysis.cluster.stages import StageGauges, measured_windows, stage_gauges
from analysis.pipeline import Analysis
from analysis.predict.facts import (
    Bound,
    CapacityFit,
    CapacityParams,
    DecodeSource,
    Estimate,
    GaugeWindow,
    KvSource,
    PrefillSource,
    RunBound,
    SlotSource,
    Workload,
)
from analysis.predict.limits_probe import read_probe
from analysis.stages.levels import level_rows
from loadknee_core.knee_params import KneeParams
from loadknee_core.numeric import json_number

#: the KV budget holds no more than this multiple of the slot limit: the KV bound the run
KV_BINDS_WITHIN = 1.1


def _estimate(value: float | None, ci: tuple[float, float] | None) -> Estimate:
    if value is None:
        return Estimate(math.nan, math.nan, math.nan)
    return Estimate(value, *ci) if ci else Estimate.exact(value)


def measured_workload(analysis: Analysis) -> Workload:
    """The mean prompt and completion tokens of the run's ok measured requests."""
    rows = measured_windows(analysis)[0]
    ok = rows[rows["cls"] == "ok"]

    def mean(column: str) -> float:
        if column not in ok:
            return math.nan
        values = pd.to_numeric(ok[column], errors="coerce")
        return float(values.mean()) if values.notna().any() else math.nan

    return Workload(mean("prompt_tokens"), mean("completion_tokens"))


def _prefill_probes(run_info: Mapping[str, Any]) -> tuple[tuple[float, float], ...]:
    """The ``(prompt tokens, ms)`` prefill probes run.json's ``prompt_source`` holds; a run from
    before them has none, and an entry that is not two finite numbers (tokens ≥ 1) is skipped."""
    source = run_info.get("prompt_source")
    raw = source.get("prefill_probes") if isinstance(source, dict) else None
    probes = []
    for entry in raw if isinstance(raw, list) else ():
        if not (isinstance(entry, list) and len(entry) == 2):
            continue
        tokens, ms = json_number(entry[0]), json_number(entry[1])
        if tokens is not None and ms is not None and 1 <= tokens < math.inf and 0 <= ms < math.inf:
            probes.append((tokens, ms))
    return tuple(probes)


#: probes whose prompt tokens lie within this factor of a length's shortest count as that
#: length (the unique tag each probe carries may tokenize a token or two apart; the lengths
#: asked are twice apart or more)
SAME_LENGTH = 1.1
#: at this many lengths or more the line goes through each length's fastest probe (fewer leave
#: a line through the fastest too few degrees of freedom for an interval)
FASTEST_FROM_LENGTHS = 4


def fastest_per_length(probes: Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """The points the prefill line goes through: each length's fastest probe where the probes
    cover :data:`FASTEST_FROM_LENGTHS` lengths or more, else every probe.

    Why the fastest: a probe's wall time is its prefill plus a constant plus jitter (the host, the
    server's step loop) that only ever adds, a few milliseconds against a prefill difference of
    the same order between neighbouring lengths; one slow probe at a short length tilts an
    ordinary fit through every probe (a run read γ at 0.0085 ms/token for a true 0.02 that way).
    Probes recorded before the client sent several rounds at five lengths (two rounds at three)
    keep the fit through every probe.
    """
    ordered = sorted(probes)
    groups: list[list[tuple[float, float]]] = []
    for tokens, ms in ordered:
        if groups and tokens <= groups[-1][0][0] * SAME_LENGTH:
            groups[-1].append((tokens, ms))
        else:
            groups.append([(tokens, ms)])
    if len(groups) < FASTEST_FROM_LENGTHS:
        return tuple(probes)
    return tuple(min(group, key=lambda p: p[1]) for group in groups)


def _prefill(
    analysis: Analysis, alpha: Estimate, beta: Estimate, workload: Workload
) -> tuple[Estimate, PrefillSource, tuple[tuple[float, float], ...]]:
    line = fit_profile(analysis).prefill
    if line.slope is not None:
        return _estimate(max(line.slope, 0.0), line.slope_ci), "ttft_fit", ()
    probes = _prefill_probes(analysis.run.run_info)
    tokens_ms = np.asarray(fastest_per_length(probes), dtype=float).reshape(-1, 2)
    line = fit_line(tokens_ms[:, 0], tokens_ms[:, 1], min_points=3)
    if line.slope is not None:  # 3 or more probes, at 2 or more lengths
        return _estimate(max(line.slope, 0.0), line.slope_ci), "probe_fit", probes
    ttft = analysis.baseline.ttft_p50_ms
    tokens = workload.input_tokens
    if ttft is None or not tokens or math.isnan(tokens) or math.isnan(alpha.value):
        return Estimate.exact(0.0), "baseline_assumed", ()

    def per_token(step: float) -> float:
        return max(ttft - step, 0.0) / tokens

    return (
        Estimate(
            per_token(alpha.value + beta.value),
            per_token(alpha.high + beta.high),
            per_token(alpha.low + beta.low),
        ),
        "baseline_assumed",
        (),
    )


def _kv_from_gauge(
    gauges: list[StageGauges], workload: Workload
) -> tuple[Estimate, StageGauges] | None:
    context = workload.held_tokens
    read = [
        g
        for g in gauges
        if g.kv_mean_pct > 0 and g.running_mean > 0 and math.isfinite(context) and context > 0
    ]
    if not read:
        return None
    best = max(read, key=lambda g: g.kv_mean_pct)

    def budget(g: StageGauges) -> float:
        return g.running_mean * context / (g.kv_mean_pct / 100.0)

    spread = [budget(g) for g in read if g.kv_mean_pct >= best.kv_mean_pct / 2.0]
    return Estimate(budget(best), min(spread), max(spread)), best


def gauge_window(analysis: Analysis) -> GaugeWindow | None:
    """How the KV gauge sampled a judged stage: the median window and the median count of
    distinct sample times in it (None: no stage has a KV reading). A mix's stage peak depends
    on it (:mod:`analysis.predict.kv_peak`): a longer stage catches higher swings."""
    judged = {v.stage for v in analysis.knee.judged}
    timeline = analysis.server_timeline
    if timeline is None or "kv_cache_usage_pct" not in timeline:
        return None
    read = timeline.loc[timeline["kv_cache_usage_pct"].notna(), "timestamp_unix_s"]
    windows = measured_windows(analysis)[1]
    seconds, samples = [], []
    spans = windows.loc[sorted(judged & set(windows.index)), ["window_start", "window_end"]]
    for start, end in spans.to_numpy(dtype=float):
        count = read[(read >= start) & (read <= end)].nunique()
        if count and end > start:
            seconds.append(end - start)
            samples.append(count)
    if not samples:
        return None
    return GaugeWindow(float(np.median(seconds)), max(1, int(np.median(samples))))


def step_offsets(points: pd.DataFrame) -> tuple[tuple[float, float], ...]:
    """Per measured batch (to 0.01), the median of its stages' offsets from the decode line
    (``residual_ms``: measured step − line), by batch: the shape a step that is no straight line
    leaves (:data:`~analysis.predict.facts.StepModel`)."""
    if points.empty or "residual_ms" not in points:
        return ()
    rows = points[["batch", "residual_ms"]].astype(float).dropna()
    by_batch = rows.groupby(rows["batch"].round(2))["residual_ms"].median().sort_index()
    return tuple(zip(map(float, by_batch.index), map(float, by_batch.to_numpy()), strict=True))


def _decode_from_e2e(analysis: Analysis, workload: Workload) -> tuple[LineFit, float]:
    """The decode line on median e2e per completion token, at the stages nobody waited in
    (see the module docstring), and the largest batch among them."""
    gauges = stage_gauges(analysis)
    knee = analysis.knee
    knee_users = knee.knee_users if knee.knee_users is not None else knee.red_line_users
    judged = {v.stage for v in knee.judged}
    summary = analysis.summary
    judged |= set(summary.loc[summary["kind"] == "baseline", "stage"].astype(int))
    xs, ys = [], []
    for stage, e2e in zip(summary["stage"].astype(int), summary["e2e_p50_ms"], strict=True):
        g = gauges.get(stage)
        if stage not in judged or g is None or not math.isfinite(float(e2e)):
            continue
        if math.isfinite(g.running_mean):
            if g.running_mean < g.users - 0.5:
                continue  # some requests waited: their e2e holds the queue
            batch = g.running_mean
        elif knee_users is None or g.users < knee_users:
            batch = float(g.users)
        else:
            continue
        xs.append(batch)
        ys.append(float(e2e) / max(workload.output_tokens, 1.0))
    line = fit_line(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float))
    return line, max(xs, default=1.0)


def _measured_e2e(analysis: Analysis) -> tuple[tuple[int, float], ...]:
    """``(users, median e2e ms)`` per judged step or refine level, the median of its stages'
    medians, for the in-sample check (:mod:`analysis.predict.insample`)."""
    levels = level_rows(analysis.summary)
    rows = levels[levels["stage"].isin({v.stage for v in analysis.knee.judged})]
    e2e = pd.to_numeric(rows["e2e_p50_ms"], errors="coerce")
    per_level = e2e.groupby(rows["target_users"].astype(int)).median().dropna()
    users, ms = per_level.index.astype(int).tolist(), per_level.astype(float).tolist()
    return tuple(zip(users, ms, strict=True))


def _plateau_slots(analysis: Analysis, alpha: Estimate, beta: Estimate) -> float | None:
    """The batch that gives the plateau's output rate on the decode line, where the knee's
    throughput flattened, at least the run's capacity (None: no such knee, no line, or a rate the
    line never gives)."""
    knee = analysis.knee
    stage = knee.knee_stage
    verdict = next((v for v in knee.stages if v.stage == stage), None)
    flat = verdict is not None and any(
        s.fired and s.name == "throughput_flattening" for s in verdict.signals
    )
    if not flat or not (math.isfinite(alpha.value) and math.isfinite(beta.value)):
        return None
    plateau = {v.stage for v in knee.judged if v.target_users >= (knee.knee_users or 0)}
    rates = analysis.summary.loc[analysis.summary["stage"].isin(plateau), "output_tok_s"]
    rate = float(pd.to_numeric(rates, errors="coerce").median())
    return plateau_batch(rate, alpha.value, beta.value, knee.max_concurrency)


def plateau_batch(
    rate: float, alpha_ms: float, beta_ms: float, capacity: int | None
) -> float | None:
    """The slots that give ``rate`` output tok/s on the decode line ``alpha + beta × batch`` ms
    per step, rounded down and never below the run's ``capacity`` (None: a rate the line never
    gives).

    A full server never serves a slot slower than a client-paced one (no idle gap between a
    request's end and the next one's start), so the line's batch for a plateau's rate is the
    slots plus that gain: round down (4.51 on a 4-slot simulator whose saturated stages ran
    12 % above the line). The run's capacity held that many in flight with the tail at the
    baseline: never fewer slots than that (3.95 from a noisy plateau still reads 4).
    """
    room = 1000.0 - rate * beta_ms
    if not math.isfinite(rate) or room <= 0:
        return None
    batch = math.floor(rate * alpha_ms / room + 1e-9)
    return float(max(1, batch, capacity or 0))


#: engines whose KV cache never holds a request back, so a run without a KV gauge assumes no KV
#: budget from its knee: llama-server admits by slot, each slot with its own context
#: (``--ctx-size`` / ``--parallel``; a request longer than a slot's context fails, it does not
#: wait), and its unified cache (``--kv-unified``) purges or aborts when full rather than queue
SLOT_ADMITTING = frozenset({"llama.cpp"})


def engine_slots(run_info: Mapping[str, Any]) -> int | None:
    """The slot count the engine itself reported at pre-flight (run.json's ``server.slots``:
    llama-server's ``/props`` ``total_slots``), None where it reported none."""
    server = run_info.get("server")
    slots = server.get("slots") if isinstance(server, Mapping) else None
    return slots if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0 else None


def fit_capacity(
    analysis: Analysis,
    knee_params: KneeParams | None = None,
    *,
    stated_slots: int | None = None,
    stated_kv_tokens: int | None = None,
) -> CapacityFit:
    """The capacity model of one analysed run (see the module docstring); ``stated_slots`` and
    ``stated_kv_tokens``: the engine's settings as the user states them."""
    kp = knee_params or analysis.knee_params
    knee = analysis.knee
    profile = fit_profile(analysis, "engine_step")
    workload = measured_workload(analysis)
    decode = profile.decode
    decode_source: DecodeSource = profile.step_source
    points = profile.decode_points
    max_batch = float(points["batch"].max()) if len(points) else 1.0
    if decode.slope is None and math.isfinite(workload.output_tokens):
        decode, max_batch = _decode_from_e2e(analysis, workload)
        decode_source = "e2e_per_token"
    alpha = _estimate(decode.intercept, decode.intercept_ci)
    beta = _estimate(decode.slope, decode.slope_ci)
    probes: tuple[tuple[float, float], ...] = ()
    if decode_source != "e2e_per_token":
        prefill, prefill_source, probes = _prefill(analysis, alpha, beta, workload)
    else:
        prefill, prefill_source = Estimate.exact(0.0), "in_step"

    slots: float | None
    slot_source: SlotSource
    engine = detect_engine(analysis.run.server_metrics, analysis.run.run_info)
    reported = engine_slots(analysis.run.run_info)
    probe = read_probe(analysis.run.run_info)
    if knee.server_slots:
        slots, slot_source = float(knee.server_slots), "server_gauge"
    elif reported is not None:
        slots, slot_source = float(reported), "engine"
    elif probe is not None and probe.slots is not None:
        slots, slot_source = float(probe.slots), "probe"
    elif knee.client_slots:
        slots, slot_source = float(knee.client_slots), "client_estimate"
    else:
        slots, slot_source = _plateau_slots(analysis, alpha, beta), "throughput_plateau"
        if slots is None:
            slot_source = "none"

    gauges = stage_gauges(analysis)
    judged = {v.stage for v in knee.judged}
    knee_stage = knee.knee_stage if knee.knee_stage is not None else knee.red_line_stage
    knee_users = knee.knee_users if knee.knee_users is not None else knee.red_line_users
    at_knee = gauges.get(knee_stage) if knee_stage is not None else None

    kv: Estimate | None = None
    kv_source: KvSource = "none"
    kv_stage_users: int | None = None
    kv_pct: float | None = None
    read = _kv_from_gauge([g for s, g in gauges.items() if s in judged], workload)
    if stated_kv_tokens is not None:
        kv, kv_source = Estimate.exact(float(stated_kv_tokens)), "stated"
    elif read is not None:
        kv, kv_source = read[0], "kv_gauge"
        kv_stage_users, kv_pct = read[1].users, read[1].kv_mean_pct
    elif engine in SLOT_ADMITTING:
        kv_source = "per_slot"
    elif probe is not None and probe.limit in ("kv", "slots", "unseen"):
        kv, kv_source = probe.kv_tokens, "probe" if probe.kv_tokens is not None else "probe_unseen"
    elif slots is not None and knee_users is not None:
        per_seq = workload.input_tokens + workload.output_tokens
        if math.isfinite(per_seq):
            kv, kv_source = Estimate.exact(slots * per_seq), "knee_assumed"
            kv_stage_users = knee_users

    if stated_slots is not None:
        slots, slot_source = float(stated_slots), "stated"
    per_seq = workload.input_tokens + workload.output_tokens
    kv_slots = kv.value / per_seq if kv is not None and per_seq > 0 else None
    kv_peak = _finite(at_knee.kv_peak_pct) if at_knee else None
    running = _finite(at_knee.running_mean) if at_knee else None
    bound: Bound
    if knee_users is None:
        bound = "none"
    elif kv_source in ("kv_gauge", "stated", "probe") and (
        (kv_peak is not None and kv_peak >= kp.memory_pressure_pct)
        or (slots is not None and kv_slots is not None and kv_slots <= slots * KV_BINDS_WITHIN)
    ):
        bound = "kv"
    elif slots is not None and (
        slot_source != "engine" or (knee.max_concurrency or 0) >= slots
    ):  # a slot count the engine reported bound the run only where the run reached it
        bound = "slots"
    else:
        bound = "compute"
    # the running maximum under a binding KV budget was its doing; a stated limit is the engine's
    model_slots = None if bound == "kv" and slot_source != "stated" else slots

    offsets = step_offsets(profile.decode_points)
    users = [v.target_users for v in knee.judged]
    parameters = analysis.run.run_info.get("parameters") or {}
    standing = analysis.standing
    deploy = analysis.recommendations.deploy
    levels = tuple(sorted({int(u) for u in users}))
    return CapacityFit(
        run_id=analysis.run_id,
        params=CapacityParams(alpha, beta, prefill, model_slots, kv),
        prefill_source=prefill_source,
        prefill_probes=probes,
        slot_source=slot_source if model_slots is not None else "none",
        kv_source=kv_source,
        workload=workload,
        decode_points=decode.points,
        decode_r2=decode.r2,
        kv_stage_users=kv_stage_users,
        kv_pct=kv_pct,
        max_batch=max_batch if np.isfinite(max_batch) else 1.0,
        max_users=max(users) if users else 0,
        measured_capacity=None if standing.cannot_tell else knee.max_concurrency,
        run_bound=RunBound(bound, knee_users, running, kv_peak, slots, kv_slots),
        host=parameters.get("host") if isinstance(parameters.get("host"), str) else None,
        levels=levels,
        decode_source=decode_source,
        tokens_per_chunk=profile.tokens_per_chunk,
        cannot_tell=standing.reason if standing.cannot_tell else None,
        measured_e2e_ms=_measured_e2e(analysis),
        step_offsets=() if decode_source == "e2e_per_token" else offsets,
        measured_deploy=None if standing.cannot_tell or deploy is None else deploy.users,
        probe=probe,
        kv_gauge_read=read is not None,
        gauge_window=gauge_window(analysis) if read is not None else None,
    )


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
