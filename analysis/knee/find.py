"""Find the knee: a verdict per step stage, the knee, the red line and the capacity figures.

Algorithm (pure; input is the record table from :func:`analysis.stages.summary.summarize_stages` and
the
:class:`~analysis.model.Baseline`; each signal is one function in :mod:`analysis.knee.signals`):

1. Order the step stages by concurrency ``c`` (their ``target_users``). The yardstick throughput
   ``X1`` is the single-user rate: the baseline stage's throughput divided by its users (the first
   step stage stands in when there is no baseline stage).
2. For each stage, evaluate the signals (each a :class:`~analysis.model.Signal` with its numbers):

   * **throughput flattening** — the throughput each added user brings,
     ``(X_s - X_prev) / (c_s - c_prev) / X1``, where ``prev`` is the previous stage that served
     requests (the baseline stage for the first step). Below ``flat_gain_ratio`` the throughput has
     flattened; below ``narrowing_gain_ratio`` the gain is narrowing (an early sign). Plain scaling
     efficiency cannot separate a stage whose added users still bring a quarter of the single-user
     rate (marginal 0.27, critical) from one where they bring 7 % (0.07, knee); the marginal gain
     can.
   * **tail departure** — the stage's e2e P95 (or P99, ``tail_percentile``; or of seconds per 1k
     tokens, ``tail_metric``) over the baseline's same figure, at or above ``tail_ratio``;
   * **SLA** — the same percentile above ``sla_ms`` (only when an absolute SLA is given);
   * **memory pressure** — peak memory %: the higher of the KV-cache usage from the server's
     ``/metrics`` and GPU memory, but KV-cache alone when GPU memory is the same at every stage
     (vLLM pre-allocates its KV pool, so NVML memory is flat and says nothing); at or above
     ``memory_pressure_pct`` it is an early sign, at or above ``oom_risk_pct`` the next stage risks
     OOM;
   * **errors** — any failed request (5xx, timeout, refused, cut stream) is an early sign and
     rules the stage out of the base capacity; an error share above ``red_line_error_pct`` is the
     red line;
   * **OOM** — GPU memory at or above ``oom_pct`` while requests fail, or GPU memory falling to
     under half of the previous stage's (itself under pressure) while requests fail: the server
     ran out of memory and its process died;
   * **client-bound** — load-generator CPU at or above ``client_cpu_limit_pct`` (100 = one core):
     the stage is marked untrusted and cannot be the knee (the client, not the server, flattened);
   * **late client** — the load generator's event loop ran late against the stage's latency
     (:mod:`analysis.knee.late_client`): untrusted likewise (its figures read the client).

3. A stage without enough usable rows (no rows, or most excluded as length mismatches; see
   :mod:`analysis.stages.data_check`) is **insufficient data**: no signal is read from it and no
   figure below comes from it. Otherwise the verdict, most severe first: **red line** (error
   share above the limit, or OOM); **knee**
   (throughput flattened while the tail departed); **critical** (any early sign: tail departed,
   gain narrowing, memory pressure, OOM risk, some errors, SLA exceeded); else **comfortable**.
4. A "knee" judged on an untrusted client figure (no interval, or one too wide) in a stage
   where nothing waited (by the server's counts where it reports its queue, else by the
   client's estimate) becomes "critical"
   (:func:`~analysis.knee.queue_demotions.demote_unsaturated`). A "knee" that a later stage
   out-serves by ``resume_gain_pct`` or more was a dip: it becomes "critical" with the numbers
   as its first reason. The knee is the first "knee" stage before the first red line;
   ``max_concurrency`` is the users of the stage before the knee (or before the red line when
   there is no knee, or the highest tested stage when there is neither). ``base_capacity`` is the
   highest stage, below the first knee or red line, with 100 % success, memory at or below
   ``memory_pressure_pct``, the tail within ``sla_ms`` when one is given, and a trusted client.

No number is formatted and no sentence built here: each signal carries its fact
(:mod:`analysis.knee.facts`), a stage's reasons are records (signals and facts, see
:data:`analysis.model.Reason`), the summary is a :class:`~analysis.knee.facts.KneeSummaryFact`
and the fit a :class:`~analysis.knee.fit.KneeFit`; the report layer words them
(:mod:`analysis.report.stage_reasons`, :mod:`analysis.report.knee_summary`).

The rule reads the table through :class:`~analysis.knee.knee_inputs.KneeInputs` (taken from the
frame once) and :func:`judge`; the knee's confidence (:mod:`analysis.knee.confidence`) judges 200
resampled throughput and tail columns on one ``KneeInputs``
(:meth:`~analysis.knee.knee_inputs.KneeInputs.with_columns`), reading each stage's other signals
(:class:`~analysis.knee.stage_verdict.StageFacts`) once: one rule for the answer and its
confidence.

This module runs the steps in order; each lives in its own module:

* :mod:`analysis.knee.knee_inputs` — the table taken apart once, and the tail yardstick;
* :mod:`analysis.knee.stage_verdict` — step 3, one stage's verdict from its signals;
* :mod:`analysis.knee.queue_demotions` — step 4's knees the queue's evidence contradicts, with
  :mod:`analysis.knee.noisy_stages` (whether a noisy knee is in doubt);
* :mod:`analysis.knee.dips` — step 4's dips;
* :mod:`analysis.knee.slot_bounds` — the slots a queue proved, which bound ``max_concurrency``.

Parameters (:class:`~loadknee_core.knee_params.KneeParams`, each with its ``--knee-*`` flag) and
defaults:

* ``throughput_column`` = ``"output_tok_s"`` (or ``"total_tok_s"``, ``"qps"``)
* ``flat_gain_ratio`` = 0.15; ``narrowing_gain_ratio`` = 0.5
* ``tail_percentile`` = ``"p95"`` (``"p99"`` for a stricter tail); ``tail_ratio`` = 2.0
* ``tail_metric`` = ``"auto"``: ``"slowdown"`` (each request's e2e over its single-user
  expectation at its lengths, :mod:`analysis.stages.slowdown`) for a replayed prompt log, whose
  lengths vary so much that the e2e tail says more about the log than about the server, else
  ``"e2e"`` (``"s_per_1k"``, seconds per 1k total tokens, on request; resolved by
  :func:`resolve_tail_metric` from run.json; ``find_knee`` alone treats ``"auto"`` as ``"e2e"``)
* ``sla_ms`` = None (no absolute SLA)
* ``memory_source`` = ``"auto"`` (the higher of KV-cache % and GPU memory %, except that GPU
  memory flat across stages — within 2 points: pre-allocated — gives way to KV-cache %)
* ``memory_pressure_pct`` = 85.0; ``oom_risk_pct`` = 95.0; ``oom_pct`` = 99.0
* ``red_line_error_pct`` = 5.0 (:data:`loadknee_core.contract.RED_LINE_ERROR_PCT`, shared with
  the sweep's early stop): 98 % success still reads as a knee and 80 % as the red line, so a small
  error share is an early sign, not yet the red line; 0 makes any error the red line
* ``client_cpu_limit_pct`` = 90.0
* ``resume_gain_pct`` = 15.0: a "knee" that a later stage (before the red line) out-serves by
  this much or more was a dip and is "critical" instead (:func:`~analysis.knee.dips.demote_dips`)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import pandas as pd

from analysis.knee.dips import demote_dips
from analysis.knee.facts import KneeSummaryFact
from analysis.knee.knee_inputs import KneeInputs
from analysis.knee.noisy_stages import with_noise
from analysis.knee.queue_demotions import demote_passing_queues, demote_unsaturated
from analysis.knee.signals import StageContext
from analysis.knee.slot_bounds import client_seen_slots, saturated_slots
from analysis.knee.stage_verdict import evaluate_stage, has_fired, stage_facts
from analysis.model import Baseline, KneeResult, StageVerdict
from analysis.stages.data_check import insufficient_rows
from loadknee_core.knee_params import KneeParams

#: prompt_source kinds in run.json that mean a replayed production log (lengths vary)
LOG_SOURCE_KINDS = ("log", "replay", "log_replay")


def resolve_tail_metric(
    params: KneeParams, run_info: Mapping[str, Any], baseline: Baseline | None = None
) -> KneeParams:
    """``params`` with ``tail_metric="auto"`` decided from the run's prompt source; a slowdown
    the run has none of (``baseline`` without one: its single-user requests' lengths did not
    vary, :mod:`analysis.stages.slowdown`) reads the e2e tail instead, whose it would be."""
    metric = params.tail_metric
    if metric == "auto":
        source = run_info.get("prompt_source")
        kind = str(source.get("kind", "")) if isinstance(source, Mapping) else ""
        metric = "slowdown" if kind in LOG_SOURCE_KINDS else "e2e"
    no_slowdown = baseline is None or (
        baseline.slowdown_p95 is None and baseline.slowdown_p99 is None
    )
    if metric == "slowdown" and no_slowdown:
        metric = "e2e"
    return params if metric == params.tail_metric else replace(params, tail_metric=metric)


def find_knee(
    summary: pd.DataFrame, baseline: Baseline, *, params: KneeParams | None = None
) -> KneeResult:
    """Verdicts for every step stage of ``summary`` and the knee they point at (pure)."""
    return judge(KneeInputs(summary, baseline, params or KneeParams()))


@dataclass(frozen=True)
class _Judged:
    """The knee rule's answer before it is written up."""

    rows: list[Any]
    verdicts: list[StageVerdict]
    ctx: StageContext
    knee: StageVerdict | None
    red: StageVerdict | None
    limit: StageVerdict | None
    max_concurrency: int | None
    slots: int | None
    seen: int | None


def _judged(inputs: KneeInputs, *, words: bool = True) -> _Judged:
    """The knee rule over ``inputs``: every stage's verdict, the knee and ``max_concurrency``
    (``words=False``: without the stages' reasons, which no decision reads)."""
    rows = inputs.rows()
    # the answer alone (words=False, the knee's confidence: 200 resamples) needs the all-stages
    # fit only where its plateau could make a stage the knee; judged without it first, and
    # again with it only then (the fit is most of a resample's time)
    ctx = inputs.context(rows, fit=words)
    verdicts = _stage_verdicts(inputs, rows, ctx, words)
    if not words and any(_plateau_could_decide(v) for v in verdicts):
        ctx = replace(ctx, fit=inputs.fit(ctx.x1))
        verdicts = _stage_verdicts(inputs, rows, ctx, words)
    verdicts = demote_unsaturated(rows, verdicts, ctx)
    verdicts = demote_dips(rows, verdicts, inputs.params, ctx.x1)
    verdicts = demote_passing_queues(rows, verdicts)
    if not words:  # the demotions put their signal's words first
        verdicts = [replace(v, reasons=()) if v.reasons else v for v in verdicts]
    red = next((v for v in verdicts if v.verdict == "red_line"), None)
    knee = next((v for v in verdicts if v.verdict == "knee"), None)
    if knee is not None and red is not None and red.target_users < knee.target_users:
        knee = None
    limit = knee or red
    # the judged stages below the limit (nothing comes from the unjudged ones)
    judged = [v.target_users for v in verdicts if v.verdict != "insufficient_data"]
    below = [users for users in judged if limit is None or users < limit.target_users]
    max_conc = below[-1] if below else None
    # the server ran no more than this at once while requests waited: by its own gauges, or
    # (without them) by the client's estimate
    slots = saturated_slots(verdicts, ctx)
    seen = client_seen_slots(rows, verdicts) if slots is None else None
    bound = slots if slots is not None else seen
    if bound is not None and max_conc is not None:
        max_conc = min(max_conc, bound)
    return _Judged(rows, verdicts, ctx, knee, red, limit, max_conc, slots, seen)


def _stage_verdicts(
    inputs: KneeInputs, rows: list[Any], ctx: StageContext, words: bool
) -> list[StageVerdict]:
    """Each level stage's verdict against the stage served before it (the baseline first)."""
    column = inputs.params.throughput_column
    prev_at = inputs.base_at if inputs.baseline.source == "baseline" else None
    verdicts = []
    for at, row in zip(inputs.order, rows, strict=True):
        prev = None if prev_at is None else inputs.records[prev_at]
        facts = inputs.facts.get((at, prev_at))
        if facts is None:  # no fact reads the fit: the same with or without it
            facts = inputs.facts[at, prev_at] = with_noise(
                stage_facts(row, prev, ctx), inputs.noise, row
            )
        verdicts.append(evaluate_stage(row, prev, ctx, facts, words=words))
        if int(row["ok"]) > 0 and not pd.isna(row[column]):
            prev_at = at
    return verdicts


def _plateau_could_decide(verdict: StageVerdict) -> bool:
    """Whether the fit's plateau could change what ``verdict`` decides: the plateau only fires
    the flattening (:func:`~analysis.knee.stage_verdict.evaluate_stage`), and a fired flattening
    makes a stage the knee only when it is trusted, its tail departed, and no earlier rule (red
    line, saturation) decided: then it was "critical" without it. Critical against comfortable
    decides nothing (only the knee, the red line and the unjudged stages do)."""
    if verdict.verdict != "critical" or not verdict.trusted:
        return False
    return has_fired(verdict, "tail_departure") and not has_fired(verdict, "throughput_flattening")


def judged_max_concurrency(inputs: KneeInputs) -> int | None:
    """The ``max_concurrency`` :func:`judge` gives, without writing the answer up."""
    return _judged(inputs, words=False).max_concurrency


def judge(inputs: KneeInputs) -> KneeResult:
    """The knee rule over ``inputs`` (what :func:`find_knee` gives for their table)."""
    j, params = _judged(inputs), inputs.params
    knee, red, fit = j.knee, j.red, j.ctx.fit
    base = _base_capacity(j.rows, j.verdicts, j.limit.stage if j.limit else -1, params)
    return KneeResult(
        stages=tuple(j.verdicts),
        knee_stage=knee.stage if knee else None,
        knee_users=knee.target_users if knee else None,
        red_line_stage=red.stage if red else None,
        red_line_users=red.target_users if red else None,
        max_concurrency=j.max_concurrency,
        base_capacity=base,
        summary=_summary(j),
        params=asdict(params),
        server_slots=j.slots,
        capacity=None if fit is None or not fit.flat else round(fit.capacity, 2),
        capacity_low=None if fit is None or not fit.flat else round(fit.low, 2),
        capacity_high=None if fit is None or not fit.flat else round(fit.high, 2),
        capacity_text="" if fit is None else fit,
        client_slots=j.seen,
        gpu_preallocated=j.ctx.gpu_preallocated,
    )


def _base_capacity(
    rows: list[Any], verdicts: list[StageVerdict], stop_at: int, params: KneeParams
) -> int | None:
    """The highest stage before ``stop_at`` (the knee's or the red line's) that served all its
    requests, trusted, within memory and the SLA: what the server carries with no warning."""
    best = None
    for row, v in zip(rows, verdicts, strict=True):
        if v.stage == stop_at:
            break
        if v.verdict == "insufficient_data":
            continue
        sig = {s.name: s for s in v.signals}
        mem = sig["memory_pressure"].value
        within = (
            v.trusted
            and int(row["ok"]) > 0
            and int(row["errors"]) == 0
            and (mem is None or mem <= params.memory_pressure_pct)
            and ("sla" not in sig or not sig["sla"].fired)
        )
        if within:
            best = v.target_users
    return best


def _summary(j: _Judged) -> KneeSummaryFact:
    """What the summary says, from the rule's answer."""
    verdicts, ctx, fit = j.verdicts, j.ctx, j.ctx.fit
    lacking = tuple(v.target_users for v in verdicts if v.verdict == "insufficient_data")
    return KneeSummaryFact(
        stages=len(verdicts),
        top_users=verdicts[-1].target_users if verdicts else None,
        lacking_users=lacking,
        first_lacking=insufficient_rows(j.rows[0]) if verdicts else None,
        knee=j.knee,
        red_line=j.red,
        max_concurrency=j.max_concurrency,
        server_slots=j.slots,
        client_slots=j.seen,
        server_reports_queue=ctx.server_slots is not None,
        fit_flat=None if fit is None else fit.flat,
        capacity=None if fit is None else (fit.low, fit.high, fit.capacity),
        untrusted_users=tuple(v.target_users for v in verdicts if not v.trusted),
        noisy_users=tuple(v.target_users for v in verdicts if v.noisy),
        tail_source=ctx.tail_source,
        tail_percentile=ctx.tail_percentile,
    )
