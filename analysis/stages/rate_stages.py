"""Open-loop rate stages: offered vs served rate, the client-side backlog, and the rate knee.

A run made with ``--llm-rates`` (``run.json`` parameters ``llm_rates``) has one ``step`` stage
per rate, in order (after the baseline when there is one). Per stage, over its measured window
(``warmup_end_unix_s`` .. ``measure_end_unix_s`` in ``stages.csv``):

* ``rate_rps``: the planned rate; ``offered_rps``: requests *planned* in the window (their
  ``intended_unix_s``) per second, any outcome; ``served_rps``: the record table's ``qps`` (ok
  requests, each counted by the share of it inside the window, :func:`~analysis.stages.
  summary.window_rates`); ``served_pct`` = served / offered × 100;
* the **backlog**: requests outstanding from their planned send to their end (waiting for a
  slot under ``--llm-max-in-flight``, queued at the server or running), as exact time
  averages: ``backlog_mean`` over the window, ``backlog_first`` and ``backlog_last`` over its
  first and last quarter; ``waited_pct`` (rows whose
  ``send_wait_ms`` exceeds :data:`WAITED_MS`) and ``send_wait_p95_ms``;
* the tail from the planned send: ``e2e_intended_p95_ms`` (``e2e_intended_ms``: no coordinated
  omission), and ``tail_ratio`` over the baseline's e2e P95.

The **rate knee** (docs/method.md, "The rate knee") is the first stage, by rate, where

1. the served rate stops following the offered one: ``served_pct`` < ``follow_pct`` (90), or
2. the backlog grows within the window: ``backlog_last`` > ``backlog_growth`` (1.5) ×
   ``backlog_first`` and by at least ``backlog_min`` (2) requests, or
3. the tail leaves the baseline: ``tail_ratio`` > ``tail_ratio`` (the knee's own rule and
   setting, :attr:`loadknee_core.knee_params.KneeParams.tail_ratio`, ``--knee-tail-ratio``: 2.0).

The highest rate below the knee is ``max_rate_rps``, the sustainable rate; with SLOs, the
highest rate below the knee whose stage meets them is ``slo_max_rate_rps``, the answer to "how
many requests/s within the SLOs". Percentiles are the record table's (exact, linear). Each signal
a stage shows is a :class:`RateSignal` (in the table's ``rate_reasons`` cell, a tuple); the words
are :mod:`analysis.report.rate_words`'.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from analysis.inputs.load import Run
from analysis.model import Baseline
from analysis.slo.evaluate import SloResult
from analysis.stages.levels import level_rows
from loadknee_core.knee_params import DEFAULTS, KneeParams

WAITED_MS = 5.0  # a send later than this past its planned time waited (not timer jitter)
#: a rate stage's verdict (the ``rate_verdict`` column): the server followed the offered rate,
#: or one of the rate knee's signals fired
FOLLOWS = "follows"
PAST_KNEE = "past knee"
RATE_COLUMNS: tuple[str, ...] = (
    "stage",
    "rate_rps",
    "offered_rps",
    "served_rps",
    "served_pct",
    "backlog_mean",
    "backlog_first",
    "backlog_last",
    "waited_pct",
    "send_wait_p95_ms",
    "e2e_intended_p95_ms",
    "tail_ratio",
    "rate_verdict",
    "rate_reasons",
)


@dataclass(frozen=True)
class RateParams:
    """The rate knee's thresholds (module docstring); ``tail_ratio`` is the knee's."""

    follow_pct: float = 90.0
    backlog_growth: float = 1.5
    backlog_min: float = 2.0
    tail_ratio: float = DEFAULTS.tail_ratio

    @classmethod
    def judged_with(cls, knee: KneeParams) -> RateParams:
        """The rate knee's thresholds for a run whose knee is judged with ``knee``."""
        return cls(tail_ratio=knee.tail_ratio)


@dataclass(frozen=True)
class RateSignal:
    """One sign of the rate knee on a stage (module docstring, 1-3): ``not_following`` (its
    ``served_pct`` under ``threshold``, the follow %), ``backlog_grew`` (``backlog_first`` to
    ``backlog_last`` requests), ``tail_departed`` (``tail_ratio`` over ``threshold``)."""

    kind: Literal["not_following", "backlog_grew", "tail_departed"]
    served_pct: float | None = None
    backlog_first: float | None = None
    backlog_last: float | None = None
    tail_ratio: float | None = None
    threshold: float | None = None


@dataclass(frozen=True)
class RateKnee:
    """The rate stages' answer: the knee's stage and rate, and the rates below it."""

    knee_stage: int | None
    knee_rate_rps: float | None
    max_rate_rps: float | None  # the highest rate below the knee (all of them when none)
    slo_max_rate_rps: float | None  # the highest of those whose stage meets the SLOs
    reasons: tuple[RateSignal, ...]  # why the knee stage is the knee
    slo_judged: bool = False  # SLO verdicts were given for the stages


def planned_rates(run_info: Mapping[str, Any]) -> tuple[float, ...] | None:
    """The rates of ``--llm-rates`` from ``run.json``; None for a closed-loop run."""
    params = run_info.get("parameters") or {}
    raw = params.get("llm_rates") if isinstance(params, Mapping) else None
    if not raw:
        return None
    try:
        rates = tuple(float(p) for p in str(raw).replace(" ", "").split(",") if p)
    except ValueError:
        return None
    return rates or None


def _pct(values: np.ndarray, q: float) -> float:
    values = values[~np.isnan(values)]
    return float(np.percentile(values, q)) if values.size else math.nan


def _outstanding(intended: np.ndarray, end: np.ndarray, start: float, stop: float) -> float:
    """Requests outstanding (planned, not yet ended) on average over ``[start, stop)``: the
    exact time average (each request's overlap with the span), no sampling to alias with."""
    if stop <= start:
        return math.nan
    overlap = np.clip(np.minimum(end, stop) - np.maximum(intended, start), 0.0, None)
    return float(overlap.sum() / (stop - start))


def _stage_row(
    requests: pd.DataFrame, window: pd.Series, rate: float, served: float, base_p95: float | None
) -> dict[str, Any]:
    start, stop = float(window["warmup_end_unix_s"]), float(window["measure_end_unix_s"])
    seconds = stop - start
    intended = requests["intended_unix_s"].to_numpy(dtype=float)
    end = requests["end_unix_s"].to_numpy(dtype=float)
    known = ~np.isnan(intended)
    intended, end = intended[known], np.where(np.isnan(end[known]), np.inf, end[known])
    in_window = (intended >= start) & (intended < stop)
    offered = float(in_window.sum()) / seconds if seconds > 0 else math.nan
    quarter = seconds / 4.0
    rows = requests[known][in_window]
    wait = rows["send_wait_ms"].to_numpy(dtype=float)
    tail = _pct(rows["e2e_intended_ms"].to_numpy(dtype=float), 95.0)
    return {
        "rate_rps": rate,
        "offered_rps": offered,
        "served_rps": served,
        "served_pct": served / offered * 100.0 if offered > 0 else math.nan,
        "backlog_mean": _outstanding(intended, end, start, stop),
        "backlog_first": _outstanding(intended, end, start, start + quarter),
        "backlog_last": _outstanding(intended, end, stop - quarter, stop),
        "waited_pct": float((wait > WAITED_MS).mean() * 100.0) if wait.size else math.nan,
        "send_wait_p95_ms": _pct(wait, 95.0),
        "e2e_intended_p95_ms": tail,
        "tail_ratio": tail / base_p95 if base_p95 and not math.isnan(tail) else math.nan,
    }


def rate_table(
    summary: pd.DataFrame,
    requests: pd.DataFrame,
    stages: pd.DataFrame,
    rates: Sequence[float],
    *,
    baseline_e2e_p95_ms: float | None,
    params: RateParams | None = None,
) -> pd.DataFrame:
    """One row per rate stage (:data:`RATE_COLUMNS`), its verdict from the knee rule."""
    p = params or RateParams()
    steps = level_rows(stages).sort_values("stage")
    served = summary.set_index("stage")["qps"] if len(summary) else pd.Series(dtype=float)
    rows: list[dict[str, Any]] = []
    by_stage = dict(tuple(requests.groupby("stage"))) if len(requests) else {}
    empty = requests.iloc[0:0]
    for rate, (_, window) in zip(rates, steps.iterrows(), strict=False):
        stage = int(window["stage"])
        got = served.get(stage, math.nan)
        row = _stage_row(
            by_stage.get(stage, empty),
            window,
            rate,
            float(got) if got == got else math.nan,
            baseline_e2e_p95_ms,
        )
        reasons = rate_signals(row, p)
        rows.append(
            {
                "stage": stage,
                **row,
                "rate_verdict": PAST_KNEE if reasons else FOLLOWS,
                "rate_reasons": tuple(reasons),
            }
        )
    return pd.DataFrame(rows, columns=list(RATE_COLUMNS))


def rate_signals(row: Mapping[str, Any], params: RateParams) -> list[RateSignal]:
    """The knee rule's signals that one stage shows (module docstring, 1-3)."""
    found: list[RateSignal] = []
    served_pct = row.get("served_pct", math.nan)
    if served_pct == served_pct and served_pct < params.follow_pct:
        found.append(
            RateSignal("not_following", served_pct=served_pct, threshold=params.follow_pct)
        )
    first, last = row.get("backlog_first", math.nan), row.get("backlog_last", math.nan)
    if (
        first == first
        and last == last
        and last > params.backlog_growth * first
        and last - first >= params.backlog_min
    ):
        found.append(RateSignal("backlog_grew", backlog_first=first, backlog_last=last))
    ratio = row.get("tail_ratio", math.nan)
    if ratio == ratio and ratio > params.tail_ratio:
        found.append(RateSignal("tail_departed", tail_ratio=ratio, threshold=params.tail_ratio))
    return found


def rate_knee(table: pd.DataFrame, slo_met: Mapping[int, bool | None] | None = None) -> RateKnee:
    """The first stage past the knee, by rate; the rates below it (module docstring)."""
    ordered = table.sort_values("rate_rps", kind="stable")
    knee_row = next((r for _, r in ordered.iterrows() if r["rate_verdict"] == PAST_KNEE), None)
    below = ordered if knee_row is None else ordered[ordered["rate_rps"] < knee_row["rate_rps"]]
    max_rate = float(below["rate_rps"].max()) if len(below) else None
    slo_rate: float | None = None
    if slo_met is not None:
        good = [float(r["rate_rps"]) for _, r in below.iterrows() if slo_met.get(int(r["stage"]))]
        slo_rate = max(good) if good else None
    judged = slo_met is not None
    if knee_row is None:
        return RateKnee(None, None, max_rate, slo_rate, (), judged)
    reasons = tuple(knee_row["rate_reasons"])
    rate = float(knee_row["rate_rps"])
    return RateKnee(int(knee_row["stage"]), rate, max_rate, slo_rate, reasons, judged)


def analyze_rates(
    summary: pd.DataFrame,
    requests: pd.DataFrame,
    stages: pd.DataFrame,
    run_info: Mapping[str, Any],
    *,
    baseline_e2e_p95_ms: float | None,
    slo_met: Mapping[int, bool | None] | None = None,
    params: RateParams | None = None,
) -> tuple[pd.DataFrame, RateKnee] | None:
    """The rate table and knee of an open-loop rate run; None for any other run."""
    rates = planned_rates(run_info)
    if rates is None or "intended_unix_s" not in requests:
        return None
    table = rate_table(
        summary,
        requests,
        stages,
        rates,
        baseline_e2e_p95_ms=baseline_e2e_p95_ms,
        params=params,
    )
    return table, rate_knee(table, slo_met)


def run_rates(
    run: Run,
    summary: pd.DataFrame,
    *,
    baseline: Baseline,
    slo: SloResult | None,
    knee: KneeParams,
) -> tuple[pd.DataFrame, RateKnee] | None:
    """:func:`analyze_rates` over a run's own rows, judged with the run's knee thresholds, its
    baseline's e2e P95 and each stage's SLO verdict: one place for the offline analysis and the
    live judge, so that both ask it the same way."""
    return analyze_rates(
        summary,
        run.requests,
        run.stages,
        run.run_info,
        baseline_e2e_p95_ms=baseline.e2e_p95_ms,
        slo_met=None if slo is None else {s.stage: s.met for s in slo.stages},
        params=RateParams.judged_with(knee),
    )
