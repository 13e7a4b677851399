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
4. Where the server reports its queue and some stage proved its running maximum a real limit
   (requests waited there), a "knee" judged on an untrusted client figure (no interval, or one
   too wide) in a stage the server ran with free slots and nothing waiting becomes "critical"
   (:func:`_demote_unsaturated`). A "knee" that a later stage out-serves by
   ``resume_gain_pct`` or more was a dip: it becomes "critical" with the numbers as its first
   reason. The knee is the first "knee" stage before the first red line; ``max_concurrency``
   is the users of the stage before the knee (or before the red line when there is no knee,
   or the highest tested stage when there is neither). ``base_capacity`` is the
   highest stage, below the first knee or red line, with 100 % success, memory at or below
   ``memory_pressure_pct``, the tail within ``sla_ms`` when one is given, and a trusted client.

No number is formatted and no sentence built here: each signal carries its fact
(:mod:`analysis.knee.facts`), a stage's reasons are records (signals and facts, see
:data:`analysis.model.Reason`), the summary is a :class:`~analysis.knee.facts.KneeSummaryFact`
and the fit a :class:`~analysis.knee.fit.KneeFit`; the report layer words them
(:mod:`analysis.report.stage_reasons`, :mod:`analysis.report.knee_summary`).

The rule reads the table through :class:`KneeInputs` (taken from the frame once) and
:func:`judge`; the knee's confidence (:mod:`analysis.knee.confidence`) judges 200 resampled
throughput and tail columns on one ``KneeInputs`` (:meth:`KneeInputs.with_columns`), reading each
stage's other signals (:class:`StageFacts`) once: one rule for the answer and its confidence.

Parameters (:class:`~loadknee_core.knee_params.KneeParams`, each with its ``--knee-*`` flag) and
defaults:

* ``throughput_column`` = ``"output_tok_s"`` (or ``"total_tok_s"``, ``"qps"``)
* ``flat_gain_ratio`` = 0.15; ``narrowing_gain_ratio`` = 0.5
* ``tail_percentile`` = ``"p95"`` (``"p99"`` for a stricter tail); ``tail_ratio`` = 2.0
* ``tail_metric`` = ``"auto"``: ``"s_per_1k"`` (seconds per 1k total tokens)
  for a replayed prompt log, whose lengths vary so much that the e2e tail says more about the
  log than about the server, else ``"e2e"`` (resolved by :func:`resolve_tail_metric` from
  run.json; ``find_knee`` alone treats ``"auto"`` as ``"e2e"``)
* ``sla_ms`` = None (no absolute SLA)
* ``memory_source`` = ``"auto"`` (the higher of KV-cache % and GPU memory %, except that GPU
  memory flat across stages — within 2 points: pre-allocated — gives way to KV-cache %)
* ``memory_pressure_pct`` = 85.0; ``oom_risk_pct`` = 95.0; ``oom_pct`` = 99.0
* ``red_line_error_pct`` = 5.0 (:data:`loadknee_core.contract.RED_LINE_ERROR_PCT`, shared with
  the sweep's early stop): 98 % success still reads as a knee and 80 % as the red line, so a small
  error share is an early sign, not yet the red line; 0 makes any error the red line
* ``client_cpu_limit_pct`` = 90.0
* ``resume_gain_pct`` = 15.0: a "knee" that a later stage (before the red line) out-serves by
  this much or more was a dip and is "critical" instead (:func:`_demote_dips`)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from copy import copy
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from analysis.knee.client_signals import (
    CLIENT_SATURATED_WAITING,
    client_saturation_signal,
    client_slots,
    cross_check,
    starved,
)
from analysis.knee.facts import (
    ClientBoundFact,
    ClientUnqueuedFact,
    GainFact,
    GaugeCheckFact,
    KneeSummaryFact,
    NoSignalFact,
    PlateauFact,
    QueuePassedFact,
    ResumedFact,
    ServerQueueFact,
    TailFact,
    TailSource,
)
from analysis.knee.fit import KneeFit, Levels
from analysis.knee.late_client import late_client_signal
from analysis.knee.refusal_signal import REFUSALS
from analysis.knee.signals import (
    StageContext,
    client_signal,
    error_signals,
    free_slots_signal,
    memory_signals,
    noise_signal,
    saturation_signal,
    tail_signals,
    tail_undecided,
    throughput_signals,
)
from analysis.model import Baseline, KneeResult, Signal, StageVerdict, Verdict
from analysis.stages.data_check import RowsFact, excluded_rows, insufficient_rows
from analysis.stages.levels import level_mask
from loadknee_core.knee_params import KneeParams
from loadknee_core.numeric import num

if TYPE_CHECKING:
    from analysis.model import Reason

#: GPU memory peaks closer than this (points) across stages are pre-allocation, not load
FLAT_GPU_SPREAD_PCT = 2.0


#: prompt_source kinds in run.json that mean a replayed production log (lengths vary)
LOG_SOURCE_KINDS = ("log", "replay", "log_replay")


def resolve_tail_metric(params: KneeParams, run_info: Mapping[str, Any]) -> KneeParams:
    """``params`` with ``tail_metric="auto"`` decided from the run's prompt source."""
    if params.tail_metric != "auto":
        return params
    source = run_info.get("prompt_source")
    kind = str(source.get("kind", "")) if isinstance(source, Mapping) else ""
    return replace(params, tail_metric="s_per_1k" if kind in LOG_SOURCE_KINDS else "e2e")


@dataclass(frozen=True)
class StageFacts:
    """A stage's signals that no throughput or tail figure changes (memory, errors, the client,
    the queues, the noise): the knee's confidence reads them once per stage, not per resample."""

    pressure: Signal
    risk: Signal
    oom: Signal
    some_errors: Signal
    error_rate: Signal
    client: Signal
    saturated: Signal
    queued: Signal
    starving: Signal
    noisy: Signal
    late: Signal | None  # the load generator's lag (None: not measured, an older run)
    disagree: GaugeCheckFact | None  # the server's gauges against the client's estimate
    note: RowsFact | None  # the rows excluded for missing their lengths


def stage_facts(row: pd.Series, prev: pd.Series | None, ctx: StageContext) -> StageFacts | RowsFact:
    """The stage's :class:`StageFacts`, or why it has too little data to judge."""
    lacking = insufficient_rows(row)
    if lacking is not None:
        return lacking
    saturated = saturation_signal(row, ctx)
    queued = client_saturation_signal(row, ctx)
    return StageFacts(
        *memory_signals(row, prev, ctx),
        *error_signals(row, ctx),
        client_signal(row, ctx),
        saturated,
        queued,
        starved(row),
        noise_signal(row, ctx),
        late_client_signal(row),
        cross_check(row, saturated, queued) if saturated.value is not None else None,
        excluded_rows(row),
    )


def late_client(facts: StageFacts) -> bool:
    """The stage's load generator was late (:mod:`analysis.knee.late_client`): untrusted."""
    return facts.late is not None and facts.late.fired


def evaluate_stage(
    row: pd.Series,
    prev: pd.Series | None,
    ctx: StageContext,
    facts: StageFacts | RowsFact | None = None,
    *,
    words: bool = True,
) -> StageVerdict:
    """All signals of one stage and the verdict they add up to; ``facts`` are
    :func:`stage_facts` of the same row, previous stage and context when already known.
    ``words=False`` leaves the reasons out (the knee's confidence needs only the answer)."""
    facts = stage_facts(row, prev, ctx) if facts is None else facts
    if isinstance(facts, RowsFact):  # no signal can be read from it: never "comfortable"
        return StageVerdict(
            stage=int(row["stage"]),
            target_users=int(row["target_users"]),
            verdict="insufficient_data",
            reasons=(facts,) if words else (),
            signals=(),
            trusted=True,
        )
    flat, narrowing = throughput_signals(row, prev, ctx)
    fit = ctx.fit
    users = float(row["target_users"])
    if not flat.fired and fit is not None and fit.flat and users > fit.high:
        plateau = PlateauFact("on_plateau", users, fit.capacity, fit.low, fit.high, fit.plateau)
        flat = replace(flat, fired=True, fact=plateau)
    departed, sla = tail_signals(row, ctx)
    pressure, risk, oom = facts.pressure, facts.risk, facts.oom
    some_errors, error_rate, client = facts.some_errors, facts.error_rate, facts.client
    saturated, queued, starving, noisy = facts.saturated, facts.queued, facts.starving, facts.noisy
    signals = [flat, narrowing, departed, pressure, risk, some_errors, error_rate, oom, client]
    if sla is not None:
        signals.insert(3, sla)
    signals += [saturated, queued, starving, noisy]
    if facts.late is not None:
        signals.append(facts.late)
    # the server's own gauges decide where it has them; the client's estimate where it has none
    gauged = saturated.value is not None
    untrusted = client.fired or starving.fired or late_client(facts)
    verdict: Verdict
    if error_rate.fired or oom.fired:
        verdict, fired = "red_line", [s for s in (oom, error_rate) if s.fired]
    elif saturated.fired and not untrusted:
        verdict, fired = "knee", [saturated, *(s for s in (flat, departed) if s.fired)]
    elif queued.fired and not gauged and not untrusted:
        verdict, fired = "knee", [queued, *(s for s in (flat, departed) if s.fired)]
    elif flat.fired and departed.fired and not untrusted:
        verdict, fired = "knee", [flat, departed]
    else:
        early = [flat if flat.fired else narrowing, departed, pressure, risk, some_errors, sla]
        fired = [s for s in early if s is not None and s.fired]
        verdict = "critical" if fired else "comfortable"
    return StageVerdict(
        stage=int(row["stage"]),
        target_users=int(row["target_users"]),
        verdict=verdict,
        reasons=_reasons(verdict, fired, departed, sla, facts) if words else (),
        signals=tuple(signals),
        trusted=not untrusted,
        noisy=noisy.fired,
    )


def _reasons(
    verdict: Verdict,
    fired: list[Signal],
    departed: Signal,
    sla: Signal | None,
    facts: StageFacts,
) -> tuple[Reason, ...]:
    """The stage's reasons: the signals behind its verdict first, then the early signs, the
    client's and the noise's caveats (each once)."""
    risk, pressure, some_errors = facts.risk, facts.pressure, facts.some_errors
    reasons: list[Reason] = list(fired)
    extra = [s for s in (risk, pressure, some_errors, sla) if s and s.fired and s not in fired]
    hidden = {id(pressure)} if risk.fired else set()  # "risks OOM" already says "pressure"
    if facts.error_rate.fired:
        hidden.add(id(some_errors))  # the red-line fact already counts the failures
    reasons += [s for s in extra if id(s) not in hidden]
    if facts.client.fired:
        reasons.append(ClientBoundFact(facts.client))
    if facts.starving.fired:
        reasons.append(facts.starving)
    if facts.late is not None and facts.late.fired:
        reasons.append(facts.late)
    if facts.disagree is not None:
        reasons.append(facts.disagree)
    if verdict == "comfortable":
        reasons.append(NoSignalFact())
    if tail_undecided(departed):  # past the limit, but not past the noise: say so
        reasons.append(departed)
    if facts.noisy.fired:
        reasons.append(facts.noisy)
    if facts.note is not None:
        reasons.append(facts.note)
    return tuple({id(r): r for r in reasons}.values())


def _rows(frame: pd.DataFrame) -> list[Any]:
    """``frame.iterrows()``'s rows (the same values) as dicts: the signals read a row only by
    ``row[...]`` and ``row.get(...)``, and a dict's lookups are ~50× a Series' (the knee's
    confidence runs this rule 200 times per analysis)."""
    columns = list(frame.columns)
    return [dict(zip(columns, values, strict=True)) for values in frame.values]


#: the columns the knee's confidence resamples: no :class:`StageFacts` reads them
RESAMPLED_COLUMNS = frozenset({"output_tok_s", "total_tok_s", "qps", "e2e_p95_ms", "e2e_p99_ms"})
#: the columns :class:`KneeInputs` reads once; :meth:`KneeInputs.with_columns` may not replace them
FIXED_COLUMNS = frozenset(
    {
        "kind",
        "stage",
        "target_users",
        "ok",
        "gpu_mem_peak_pct",
        "running_max",
        "client_running",
        "output_tok_s_hw_pct",
    }
)


class KneeInputs:
    """A record table as the knee rule reads it, taken from the frame once: every stage as a
    dict, the level stages' order, and what the stages are judged against that no throughput or
    tail figure changes (GPU memory flatness, the server's and the client's slots, the fit's
    levels). :func:`find_knee` judges one; the knee's confidence
    (:mod:`analysis.knee.confidence`) takes one and judges it again with 200 resampled
    throughput and tail columns (:meth:`with_columns`) — the same rule, without rebuilding
    the rest from a frame each time."""

    def __init__(self, summary: pd.DataFrame, baseline: Baseline, params: KneeParams) -> None:
        self.baseline, self.params = baseline, params
        self.columns = frozenset(summary.columns)
        #: every stage (the baseline stage is the first one compared with), as :func:`_rows`
        self.records = _rows(summary)
        self.values = {
            params.throughput_column: summary[params.throughput_column].to_numpy(
                dtype=float, na_value=np.nan
            )
        }
        level = level_mask(summary)
        users = summary["target_users"].to_numpy(dtype=float, na_value=np.nan)[level]
        stage = summary["stage"].to_numpy(dtype=float, na_value=np.nan)[level]
        #: the level stages sorted by users, then stage (NaN last, ties kept in order)
        self.order = np.flatnonzero(level)[np.lexsort((stage, users))].tolist()
        self.base_at: int | None = None
        if baseline.stage is not None:
            hit = np.flatnonzero(summary["stage"].to_numpy() == baseline.stage)
            self.base_at = int(hit[0]) if len(hit) else None
        steps = summary.iloc[self.order]
        if params.tail_metric == "s_per_1k":
            tails = {"p95": baseline.s_per_1k_total_p95, "p99": baseline.s_per_1k_total_p99}
        else:
            tails = {"p95": baseline.e2e_p95_ms, "p99": baseline.e2e_p99_ms}
        used = params.tail_percentile
        if tails[used] is None:  # e.g. a typed-in record table with P99 only
            used = "p99" if used == "p95" else "p95"
            used = used if tails[used] is not None else params.tail_percentile
        self.tail_used, self.base_tail = used, tails[used]
        peaks = steps["gpu_mem_peak_pct"].to_numpy(dtype=float, na_value=np.nan)
        peaks = peaks[peaks > 0]  # 0 = the process was down (restart), not pre-allocation; no NaN
        self.gpu_flat = len(peaks) > 0 and float(peaks.max() - peaks.min()) < FLAT_GPU_SPREAD_PCT
        all_peaks = steps["gpu_mem_peak_pct"].to_numpy(dtype=float, na_value=np.nan)
        with_peaks = steps["target_users"].to_numpy(dtype=float)[all_peaks > 0]
        self.gpu_preallocated = (
            self.gpu_flat
            and len(peaks) >= 3
            and float(with_peaks.max()) >= 4 * max(1.0, float(with_peaks.min()))
        )
        running = np.array([])
        if "running_max" in steps:
            running = steps["running_max"].to_numpy(dtype=float, na_value=np.nan)
            running = running[~np.isnan(running)]
        self.server_slots = float(running.max()) if len(running) and running.max() > 0 else None
        self.client_slots = client_slots(steps)
        self.levels = Levels(summary, params.throughput_column)
        #: per (stage, previous stage) position, its :func:`stage_facts`
        self.facts: dict[tuple[int, int | None], StageFacts | RowsFact] = {}
        #: per stage id, whether it is noisy as another judgement found it (:meth:`noise_as`)
        self.noise: dict[int, bool] | None = None

    def noise_as(self, judged: KneeResult) -> KneeInputs:
        """These inputs with each stage as noisy as ``judged`` found it, where a stage's noise
        mattered: noisy, unless its knee cleared its noise (:func:`_knee_clears_noise`).

        Why: the knee's confidence judges resampled tables whose interval columns are cleared
        (the resample is the noise), so no stage reads as noisy there and no noisy knee yields
        to the server's word; the resamples then answered by another rule than the answer's.
        The 8-slot simulator on 1.8 s stages: the answer 8 (a noisy flattening at 8 users with
        8 of 8 slots free of a queue yields; 12 users queued), 0 % of resamples agreeing and
        100 % saying 6. Whether a stage's figures are too noisy to judge is a property of its
        measurement, not of one resample of it."""
        out = copy(self)
        out.facts = {}
        out.noise = {int(v.stage): v.noisy and not _knee_clears_noise(v) for v in judged.stages}
        return out

    def with_columns(self, values: Mapping[str, Sequence[float]]) -> KneeInputs:
        """The same table with these columns' figures (one per stage, in the table's order)
        in place of its own; the fixed parts are shared."""
        if fixed := FIXED_COLUMNS.intersection(values):
            raise ValueError(f"columns read once cannot be replaced: {sorted(fixed)}")
        out = copy(self)
        if not RESAMPLED_COLUMNS.issuperset(values):
            out.facts = {}  # a column the facts may read changed: read them again
        names = list(values)
        columns = [list(values[name]) for name in names]
        out.records = [
            {**record, **dict(zip(names, figures, strict=True))}
            for record, *figures in zip(self.records, *columns, strict=True)
        ]
        out.values = {**self.values}
        for name in names:
            if name in out.values:
                out.values[name] = np.asarray(values[name], dtype=float)
        return out

    def rows(self) -> list[Any]:
        """The level stages' records, sorted by users."""
        return [self.records[i] for i in self.order]

    def context(self, rows: list[Any], *, fit: bool = True) -> StageContext:
        """What every stage is judged against; ``rows`` are :meth:`rows` (``fit=False``:
        without the all-stages fit, :meth:`fit` left for the caller to add when it matters)."""
        params, baseline = self.params, self.baseline
        x1 = None
        if self.base_at is not None and baseline.target_users:
            x = num(self.values[params.throughput_column][self.base_at])
            x1 = None if x is None else x / baseline.target_users
        base_tail, tail_source, base_low = _tail_yardstick(
            self.columns, rows, baseline, self.base_tail, self.tail_used, params,
            None if self.base_at is None else self.records[self.base_at],
        )  # fmt: skip
        return StageContext(
            x1=x1 or None,
            base_tail_ms=base_tail,
            base_tail_low_ms=base_low,
            tail_percentile=self.tail_used,
            tail_source=tail_source,
            gpu_flat=self.gpu_flat,
            gpu_preallocated=self.gpu_preallocated,
            params=params,
            server_slots=self.server_slots,
            client_slots=self.client_slots,
            fit=self.fit(x1) if fit else None,
        )

    def fit(self, x1: float | None) -> KneeFit | None:
        """The rise-then-plateau fit over the levels' throughput (``x1``: one user's rate)."""
        params = self.params
        return self.levels.fit(
            self.values[params.throughput_column],
            x1,
            flat_gain_ratio=params.flat_gain_ratio,
            resamples=params.fit_resamples,
        )


def _tail_yardstick(
    columns: frozenset[str],
    rows: list[Any],
    baseline: Baseline,
    base_tail: float | None,
    used: str,
    params: KneeParams,
    base_row: Any | None = None,
) -> tuple[float | None, TailSource, float | None]:
    """The single-user tail every stage's tail is compared against, whose it is, and the lower
    end of its interval (from resampling that stage's time windows; None where it has none).

    The baseline's, unless a 1-user level measured at least as many requests and found a lower
    tail: then that level's. Interference (another process, a cold cache, a busy client) only
    ever adds latency, so the lower of two one-at-a-time tails is the nearer to the server's own;
    a stage's interval already covers its own noise, but not a yardstick inflated by one slow
    request: a 10-request baseline on a busy machine can show a P95 of 9.9 s at a median of
    2.75 s while the 1-user level's 32 requests show 4.4 s, and against 9.9 s a 16-user stage of
    an 8-slot server, half its requests queued, would read as "tail not departed".
    """

    def low(row: Any | None) -> float | None:
        """The row's lower bound of the e2e tail, on the yardstick's own scale (the e2e
        interval's relative width carried to seconds per 1k tokens likewise). A stage too short
        for an interval (a 10-request baseline) falls back on its median: a tail is never below
        it, and a P95 far above it is one slow request, the noise this bound is for."""
        if row is None:
            return None
        e2e, e2e_low = num(row.get(f"e2e_{used}_ms")), num(row.get(f"e2e_{used}_low_ms"))
        if e2e_low is None:
            e2e_low = num(row.get("e2e_p50_ms"))
        tail = num(row.get(column))
        if tail is None or not e2e or e2e_low is None:
            return None
        return tail * min(e2e_low, e2e) / e2e

    column = f"s_per_1k_total_{used}" if params.tail_metric == "s_per_1k" else f"e2e_{used}_ms"
    if baseline.source != "baseline" or base_tail is None:
        return base_tail, "baseline", None
    if column not in columns:
        return base_tail, "baseline", None
    best: float = base_tail
    source: TailSource = "baseline"
    is_baseline = base_row is not None and base_row.get("kind") == "baseline"
    best_low = low(base_row) if is_baseline else None
    for row in (r for r in rows if r["target_users"] == 1):
        tail = num(row[column])
        if tail is not None and int(row["ok"]) >= baseline.requests and 0 < tail < best:
            best, source, best_low = tail, "one_user_level", low(row)
    return best, source, best_low


def _base_capacity(
    rows: list[Any], verdicts: list[StageVerdict], stop_at: int, params: KneeParams
) -> int | None:
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
    params = inputs.params
    rows = inputs.rows()
    # the answer alone (words=False, the knee's confidence: 200 resamples) needs the all-stages
    # fit only where its plateau could make a stage the knee; judged without it first, and
    # again with it only then (the fit is most of a resample's time)
    ctx = inputs.context(rows, fit=words)
    verdicts = _stage_verdicts(inputs, rows, ctx, words)
    if not words and any(_plateau_could_decide(v) for v in verdicts):
        ctx = replace(ctx, fit=inputs.fit(ctx.x1))
        verdicts = _stage_verdicts(inputs, rows, ctx, words)
    verdicts = _demote_unsaturated(rows, verdicts, ctx)
    verdicts = _demote_dips(rows, verdicts, params, ctx.x1)
    verdicts = _demote_passing_queues(rows, verdicts)
    if not words:  # the demotions put their signal's words first
        verdicts = [replace(v, reasons=()) if v.reasons else v for v in verdicts]
    red = next((v for v in verdicts if v.verdict == "red_line"), None)
    knee = next((v for v in verdicts if v.verdict == "knee"), None)
    if knee is not None and red is not None and red.target_users < knee.target_users:
        knee = None
    limit = knee or red
    judged = [v for v in verdicts if v.verdict != "insufficient_data"]  # nothing comes from those
    users = [v.target_users for v in judged]
    if limit is not None:
        before = [v.target_users for v in judged if v.target_users < limit.target_users]
        max_conc = before[-1] if before else None
    else:
        max_conc = users[-1] if users else None
    slots = _saturated_slots(verdicts, ctx)
    if slots is not None and max_conc is not None and max_conc > slots:
        max_conc = slots  # the server ran no more than this at once while requests waited
    seen = _client_seen_slots(rows, verdicts) if slots is None else None
    if seen is not None and max_conc is not None and max_conc > seen:
        max_conc = seen  # the same bound, from the client's own estimate
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
            facts = inputs.facts[at, prev_at] = _with_noise(
                stage_facts(row, prev, ctx), inputs.noise, row
            )
        verdicts.append(evaluate_stage(row, prev, ctx, facts, words=words))
        if int(row["ok"]) > 0 and not pd.isna(row[column]):
            prev_at = at
    return verdicts


def _with_noise(
    facts: StageFacts | RowsFact, noise: dict[int, bool] | None, row: Any
) -> StageFacts | RowsFact:
    """``facts`` with the stage's noise as :meth:`KneeInputs.noise_as` set it, if it did."""
    if noise is None or not isinstance(facts, StageFacts):
        return facts
    fired = noise.get(int(row["stage"]))
    if fired is None:
        return facts
    return replace(facts, noisy=replace(facts.noisy, fired=fired))


def _plateau_could_decide(verdict: StageVerdict) -> bool:
    """Whether the fit's plateau could change what ``verdict`` decides: the plateau only fires
    the flattening (:func:`evaluate_stage`), and a fired flattening makes a stage the knee only
    when it is trusted, its tail departed, and no earlier rule (red line, saturation) decided:
    then it was "critical" without it. Critical against comfortable decides nothing (only the
    knee, the red line and the unjudged stages do)."""
    if verdict.verdict != "critical" or not verdict.trusted:
        return False
    fired = {s.name: s.fired for s in verdict.signals}
    return fired.get("tail_departure", False) and not fired.get("throughput_flattening", False)


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


def _saturated_slots(verdicts: list[StageVerdict], ctx: StageContext) -> int | None:
    """The server's running maximum, when some stage saw it saturated (requests waiting)."""
    for v in verdicts:
        if any(s.name == "server_saturated" and s.fired for s in v.signals):
            return int(ctx.server_slots) if ctx.server_slots else None
    return None


def _client_seen_slots(rows: list[Any], verdicts: list[StageVerdict]) -> int | None:
    """The requests the server ran at once by the client's estimate: the estimate of the stage
    the client saw most deeply queued (the most waiting on average; on a tie the lower estimate),
    among the stages it saw saturated, rounded (None when no stage was).

    The deepest queue, because just past the limit the estimate errs both ways and deeper it
    settles: 44 users on 40 slots read 41.4 running in an exact FIFO loop (out-of-step requests
    all wait a little, which reads as service), 48 read 40.0; on a busy machine (load 3.6 on 2
    cores) 7 users on 6 slots read 5.46 running and 0.86 waiting (the client's gaps between
    requests grow), 8 users read 6.0 and 2.0. The lowest estimate, the rule before, answered 5
    for 6 slots there.

    Only stages without the server's own gauges count (:func:`_client_queued`): where the server
    counts its queue and saw nothing wait, a busy client's late requests are not a limit (a
    server refusing above 20 that never queued read 18.2 running at 20 users from the client
    beside three other test processes, and the answer fell to 18)."""
    seen = [
        (num(row.get("client_waiting")) or 0.0, -float(row["client_running"]))
        for row, v in zip(rows, verdicts, strict=True)
        if _client_queued(v)
    ]
    return max(1, int(-max(seen)[1] + 0.5)) if seen else None


def _client_queued(verdict: StageVerdict) -> bool:
    """The client's estimate saw requests wait where the server exports no gauges of its own
    (the server's counts decide where it has them), and no later stage showed it passing
    (:func:`_demote_passing_queues`)."""
    sig = {s.name: s for s in verdict.signals}
    server, client = sig.get("server_saturated"), sig.get("client_saturated")
    passed = sig.get("queue_passed")
    if passed is not None and passed.fired:
        return False
    return client is not None and client.fired and (server is None or server.value is None)


def _queued(verdict: StageVerdict) -> bool:
    """The server's counts, or (without them) the client's estimate, saw requests wait."""
    server = next((s for s in verdict.signals if s.name == "server_saturated"), None)
    return (server is not None and server.fired) or _client_queued(verdict)


def _demote_unsaturated(
    rows: list[Any], verdicts: list[StageVerdict], ctx: StageContext
) -> list[StageVerdict]:
    """A "knee" from an untrusted client figure where the server says it had free slots and
    nothing waited becomes "critical" — once some stage proved the slots are a real limit.

    Why: a stage too short for an interval (or with one too wide) judges flattening on its point
    figure. On a 2 s window the 40-slot simulator served 1,177 tok/s at 32 users and 1,124 at 34
    (one request per user, edges dominate) while its own counters said 34 running, 0 waiting;
    48 users then queued 8 behind 40 running. The refinement bisected into 34 and recommended
    32 for a server with 40 slots. The server's word is the better evidence there; a stage
    measured well enough for a trusted interval keeps its client-side verdict (a compute-bound
    bend below the slot count still shows as a knee), and so does one whose knee clears its own
    noise (:func:`_knee_clears_noise`)."""
    if _saturated_slots(verdicts, ctx) is None:
        return _demote_unqueued(verdicts)
    out = list(verdicts)
    for i, (row, verdict) in enumerate(zip(rows, verdicts, strict=True)):
        if verdict.verdict != "knee" or not verdict.noisy or _knee_clears_noise(verdict):
            continue
        if any(s.name == "server_saturated" and s.fired for s in verdict.signals):
            continue
        free = free_slots_signal(row, ctx)
        if not free.fired or not isinstance(free.fact, ServerQueueFact):
            continue
        free = replace(free, fact=replace(free.fact, overrules_client=True))
        out[i] = _critical_by(verdict, free)
    return out


def _recovers(
    rate: float,
    before: tuple[float, int] | None,
    later: tuple[float, int],
    params: KneeParams,
    x1: float | None,
) -> bool:
    """Whether a later stage (rate, users) out-serves a flat stage serving ``rate`` by
    ``resume_gain_pct`` and gains at least the flat ratio per user over the stage ``before`` it."""
    if later[0] < rate * (1 + params.resume_gain_pct / 100):
        return False
    if not x1 or before is None or later[1] <= before[1]:
        return True
    return (later[0] - before[0]) / (later[1] - before[1]) / x1 >= params.flat_gain_ratio


def _critical_by(verdict: StageVerdict, signal: Signal) -> StageVerdict:
    """``verdict`` as "critical", ``signal`` its first reason and its last signal."""
    return replace(
        verdict,
        verdict="critical",
        reasons=(signal, *verdict.reasons),
        signals=(*verdict.signals, signal),
    )


def _demote_unqueued(verdicts: list[StageVerdict]) -> list[StageVerdict]:
    """Without the server's gauges: a "knee" judged on an untrusted client throughput figure (no
    interval, or one too wide) in a stage where the client's own queue estimate saw nothing wait
    becomes "critical". The client's queue estimate rests on every request's TTFT, the flattening
    on the difference of two noisy rates: on 8 s windows too short for an interval the 40-slot
    simulator's 30 → 32 users gained 0.14× one user's rate (the compute bend's own slope there)
    while 0.4 requests waited, and the sweep stopped at 32, max_concurrency 30 for 40 slots.
    A knee that clears its own noise (:func:`_knee_clears_noise`) stands."""
    out = list(verdicts)
    for i, verdict in enumerate(out):
        if verdict.verdict != "knee" or not verdict.noisy or _knee_clears_noise(verdict):
            continue
        queue = next((s for s in verdict.signals if s.name == "client_saturated"), None)
        server = next((s for s in verdict.signals if s.name == "server_saturated"), None)
        if queue is None or queue.value is None or queue.fired:
            continue
        if server is not None and server.value is not None:
            continue
        if queue.value >= CLIENT_SATURATED_WAITING:
            continue  # something waited, only not enough to call it saturated
        fact = ClientUnqueuedFact("client_unqueued", queue.value, CLIENT_SATURATED_WAITING)
        signal = Signal("client_unqueued", True, queue.value, CLIENT_SATURATED_WAITING, fact=fact)
        out[i] = _critical_by(verdict, signal)
    return out


def _knee_clears_noise(verdict: StageVerdict) -> bool:
    """Whether a noisy stage's knee holds at both ends of its intervals: flat at the upper end of
    its gain (both stages' throughput intervals) and departed at the lower end of its tail.

    Why: "noisy" says the stage's throughput interval is wider than ``max_interval_pct``, not
    that its verdict is in doubt; the two signals already read their intervals. A compute-bound
    simulator (12 slots, prefill-heavy; a fresh machine under a CPU hog) served 89 → 104 tok/s at
    4 → 8 users (one user 48): at most 0.147× per user within a ±12.5 % interval, the tail at
    least 4.3× the baseline, 7 of 12 slots running. The server's free slots demoted that knee and
    the answer moved to 16 users' queue, capacity 8, which 2 % of the resamples gave (98 %: 4).
    A flattening read on point figures (no interval: ``gain_upper_ratio`` None) does not clear
    its noise."""
    flat = next((s for s in verdict.signals if s.name == "throughput_flattening"), None)
    tail = next((s for s in verdict.signals if s.name == "tail_departure"), None)
    if flat is None or tail is None or not (flat.fired and tail.fired):
        return False
    gain, departed = flat.fact, tail.fact
    if not isinstance(gain, GainFact) or not isinstance(departed, TailFact):
        return False
    upper, lower = gain.gain_upper_ratio, departed.lower_ratio
    return (
        upper is not None
        and upper < gain.threshold_ratio
        and lower is not None
        and lower >= departed.threshold_ratio
    )


def _refusing(verdict: StageVerdict) -> bool:
    """A red line whose every failure was turned away at once (the server's admission limit):
    the requests it served measure the server as any stage's do."""
    return any(s.name == REFUSALS and s.fired for s in verdict.signals)


def _demote_dips(
    rows: list[Any], verdicts: list[StageVerdict], params: KneeParams, x1: float | None = None
) -> list[StageVerdict]:
    """A "knee" that a later stage (before the red line) out-serves by ``resume_gain_pct`` or
    more was a dip, not the point where throughput stopped growing: it becomes "critical".

    Real engines dip: llama-server on 2 busy cores served 125 → 144 → 237 tok/s at 2 → 4 → 8
    users; the flat step to 4 with its departed tail read as the knee, yet 8 users served 65 %
    more. The knee is where added users stop paying, for good.

    A later stage that out-serves the knee but whose gain over the last stage *before* the knee
    is still flat per added user (below ``flat_gain_ratio`` of one user's rate) is no recovery:
    the knee stage fell below the plateau, the plateau held. llama-server with 8 slots served
    420 tok/s at 8 users, 300 at 16 and 500 at 32 (97 alone): 8 → 32 bought 0.03× per user,
    yet 16 read as a dip and the knee moved to 32, max_concurrency 16 on 8 slots.

    A red line of refusals does not end the search: its served requests measure the server. A
    server refusing above 10, starved for its 2 s refine stage at 10 users beside three other
    test processes, served 954 tok/s there at twice the latency, then 1,720 at 12 users with 10
    in flight and its usual latency: 10 was a dip, and the refusals bound the answer."""
    col = params.throughput_column
    rates = [num(row[col]) for row in rows]
    users = [int(v.target_users) for v in verdicts]
    out = list(verdicts)
    for i, verdict in enumerate(out):
        rate = rates[i]
        if verdict.verdict != "knee" or not rate:
            continue
        if _queued(verdict):
            continue  # the server (or the client's view of it) queued: not a dip
        before: tuple[float, int] | None = None  # the last served stage before this one
        for j in range(i - 1, -1, -1):
            earlier = rates[j]
            if earlier and out[j].verdict != "insufficient_data":
                before = (earlier, users[j])
                break

        best: tuple[float, int] | None = None
        for later, later_rate in zip(out[i + 1 :], rates[i + 1 :], strict=True):
            if later.verdict == "red_line" and not _refusing(later):
                break  # a breakdown: nothing past it measures the server (a refusal does)
            if (
                later_rate is not None
                and later.trusted
                and _recovers(rate, before, (later_rate, later.target_users), params, x1)
                and (best is None or later_rate > best[0])
            ):
                best = (later_rate, later.target_users)
        if best is None:
            continue
        dip = Signal(
            "throughput_resumed",
            True,
            best[0] / rate,
            1 + params.resume_gain_pct / 100,
            fact=ResumedFact(
                "throughput_resumed", col, best[1], best[0], rate, params.resume_gain_pct
            ),
        )
        out[i] = replace(
            verdict,
            verdict="critical",
            reasons=(dip, *verdict.reasons),
            signals=(*verdict.signals, dip),
        )
    return out


def _demote_passing_queues(rows: list[Any], verdicts: list[StageVerdict]) -> list[StageVerdict]:
    """A "knee" resting on the client's queue estimate (no server gauges) becomes "critical"
    when a later judged stage kept at least as many requests in flight and saw none wait (its
    client estimate under :data:`~analysis.knee.client_signals.CLIENT_SATURATED_WAITING`).

    Why: a queue at a slot or KV limit does not empty as users are added. Beside three other
    test processes on two cores, an independent server refusing above 10 (queueing nothing)
    answered 40 % slower for one 2 s refine stage at 10 users (TTFT P50 140 ms against 76 ms
    at every other level: the server's process was starved): a third of its requests read as
    waiting, 0.76 on average, and the answer was 9 "bound by the knee", while 12 and 16 users,
    9.8 in flight, saw 0.04 and 0.10 wait."""
    out = list(verdicts)
    for i, verdict in enumerate(out):
        if verdict.verdict != "knee" or not _client_queued(verdict):
            continue
        if any(s.name == "server_saturated" and s.fired for s in verdict.signals):
            continue
        row = rows[i]
        waiting, in_flight = num(row.get("client_waiting")), num(row.get("client_in_flight"))
        if waiting is None or in_flight is None:
            continue
        for later, after in zip(out[i + 1 :], rows[i + 1 :], strict=True):
            later_waiting = num(after.get("client_waiting"))
            later_flight = num(after.get("client_in_flight"))
            if (
                later.verdict == "insufficient_data"
                or later_waiting is None
                or later_flight is None
                or later_flight < in_flight
                or later_waiting >= CLIENT_SATURATED_WAITING
            ):
                continue
            fact = QueuePassedFact(
                "queue_passed", waiting, in_flight, later.target_users, later_waiting, later_flight
            )
            passed = Signal(
                "queue_passed", True, later_waiting, CLIENT_SATURATED_WAITING, fact=fact
            )
            out[i] = replace(
                verdict,
                verdict="critical",
                reasons=(passed, *verdict.reasons),
                signals=(*verdict.signals, passed),
            )
            break
    return out


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
