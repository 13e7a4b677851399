"""``predict --check``: a prediction at another run's lengths, against what that run measured.

The one honest test of the model is a real sweep of the user's own server. Given a fit from one
run and a second run (:func:`measured_run`: its lengths, its capacity, its P95 e2e per level),
:func:`check` predicts at the second run's lengths and thresholds and compares:

* **Capacity**: the prediction's deploy figure (before the tail departs, the throughput
  flattens or its KV use passes the memory threshold) against the run's deploy answer, the
  first number ``loadknee analyze`` prints, where the answer's bound is one the prediction
  judges (:func:`~.facts.modelled_bounds`: memory only where the source run had a KV gauge and
  the knee reads it, :func:`~.whatif.judges_memory`), else against the run's knee; and
  the prediction's offline batch (before the throughput flattens) against the run's knee
  (``max_concurrency``). A slot- or KV-bound server gives both the same figure; a server with
  no hard limit doubles its tail well before its throughput stops growing (the compute-bound
  simulator: the tail departs at 24–32 users, the knee sits at 48–64), and holding the deploy
  figure against the knee would call a right prediction wrong. A sweep only tests its levels,
  so it places a capacity between the level it reports and its next level less one (1, 2, 4,
  8, 16 with the knee at 8: 4–7; the model, at every whole number of users, may say 6 for that
  same server); a capacity that is no tested level (the server's slot count capped it) is
  that number exactly. The prediction agrees where its interval meets that span; its error is
  the point's distance from the span over the measured capacity (0 within it), beside the raw
  (point − measured) / measured.
* **Latency per level**: at each step level both have, the model's e2e (the same for every
  request: the model has no spread, so it sits below a measured P95 by the run's own spread)
  with the 5th–95th percentile over the prediction's resampled parameters, against the P95.
* **A run that cannot tell** (``loadknee analyze`` exits 3 on it): as the source, the prediction
  is refused (:func:`~.whatif.predict`); as the run checked against, it has no capacity
  (``MeasuredRun.cannot_tell``), so only the latency per level is compared.

Facts only; :mod:`analysis.report.predict_words` words them.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from analysis.advice.deploy import binding_stage
from analysis.advice.facts import DeployBound
from analysis.cluster.stages import measured_windows
from analysis.pipeline import Analysis
from analysis.predict.batching import TOP_USERS, Draws, grid
from analysis.predict.facts import (
    MODELLED_BOUNDS,
    Agreement,
    CapacityFit,
    Check,
    LevelCheck,
    LevelMetric,
    MeasuredRun,
    Prediction,
    Workload,
    WorkloadSource,
    modelled_bounds,
)
from analysis.predict.fit import gauge_window, measured_workload
from analysis.predict.mix import mix_workload
from analysis.predict.whatif import draws, predict
from analysis.stages.baseline import lengths_vary
from loadknee_core.knee_params import DEFAULTS, KneeParams


def _prompt_source(run_info: dict) -> Workload | None:
    source = run_info.get("prompt_source") or {}
    try:
        lengths = float(source["input_tokens"]), float(source["output_tokens"])
    except (KeyError, TypeError, ValueError):
        return None
    return Workload(*lengths) if all(math.isfinite(v) and v >= 1 for v in lengths) else None


def _rows_mix(analysis: Analysis) -> Workload | None:
    """The mix of the run's ok measured rows where their lengths vary (a replayed log:
    :func:`~analysis.stages.baseline.lengths_vary`), as a prompt log's would be read
    (:func:`~analysis.predict.mix.mix_workload`); None at fixed lengths."""
    rows = measured_windows(analysis)[0]
    ok = rows[rows["cls"] == "ok"]
    if not lengths_vary(ok):
        return None
    tokens = ok[["prompt_tokens", "completion_tokens"]].apply(pd.to_numeric, errors="coerce")
    tokens = tokens[(tokens > 0).all(axis=1)].dropna()
    if tokens.empty:
        return None
    return mix_workload(
        tokens["prompt_tokens"].to_numpy(float), tokens["completion_tokens"].to_numpy(float)
    )


def measured_run(analysis: Analysis) -> MeasuredRun | None:
    """What ``analysis``'s run measured (None: neither its rows nor run.json give its lengths):
    its mean lengths, or the mix of its rows where their lengths vary."""
    workload = _rows_mix(analysis) or measured_workload(analysis)
    source: WorkloadSource = "rows"
    if not (math.isfinite(workload.input_tokens) and math.isfinite(workload.output_tokens)):
        fallback = _prompt_source(analysis.run.run_info)
        if fallback is None:
            return None
        workload, source = fallback, "run_json"
    knee = analysis.knee
    past = knee.knee_users if knee.knee_users is not None else knee.red_line_users
    unknown = analysis.standing.cannot_tell  # no capacity to check against: none is kept
    deploy = analysis.recommendations.deploy
    bound_at = None
    if deploy is not None and deploy.bound != "tested_range":
        bound_at = binding_stage(knee, deploy.bound)
    s = analysis.summary
    steps = s[s["kind"] == "step"]
    users = steps["target_users"].astype(int)

    def per_level(column: str) -> tuple[tuple[int, float], ...]:
        """The column's median per step level (levels refined twice hold two stages)."""
        if column not in steps:
            return ()
        values = pd.to_numeric(steps[column], errors="coerce").groupby(users).median().dropna()
        pairs = zip(values.index.astype(int).tolist(), values.astype(float).tolist(), strict=True)
        return tuple(pairs)

    slowed = analysis.knee.params.get("tail_metric") == "slowdown"
    run = MeasuredRun(
        run_id=analysis.run_id,
        workload=workload,
        workload_source=source,
        capacity=None,
        past_users=None,
        levels=tuple(sorted({int(u) for u in steps["target_users"]})),
        p95_e2e_ms=per_level("e2e_p95_ms"),
        p95_slowdown=per_level("slowdown_p95") if slowed else (),
        cannot_tell=analysis.standing.reason if unknown else None,
        knee_capacity=None if unknown else knee.max_concurrency,
        knee_past_users=None if unknown else past,
        deploy_users=None if unknown or deploy is None else deploy.users,
        deploy_bound=None if unknown or deploy is None else deploy.bound,
        deploy_past_users=None if unknown or bound_at is None else bound_at.target_users,
        gauge_window=gauge_window(analysis),
    )
    return held_against(run, MODELLED_BOUNDS)


def held_against(m: MeasuredRun, bounds: frozenset[DeployBound]) -> MeasuredRun:
    """``m`` holding what a prediction that judges ``bounds`` is checked against: its deploy
    answer where one of them bound it, else its knee's figure (:attr:`MeasuredRun.capacity`);
    nothing where the run cannot tell."""
    if m.cannot_tell is not None:
        return replace(m, capacity=None, past_users=None)
    if m.deploy_bound in bounds:
        return replace(m, capacity=m.deploy_users, past_users=m.deploy_past_users)
    return replace(m, capacity=m.knee_capacity, past_users=m.knee_past_users)


def _level_checks(p: Prediction, measured: MeasuredRun, top: int) -> tuple[LevelCheck, ...]:
    """Per step level both have, the model's e2e against the run's P95; for a length mix the
    model's e2e over its e2e at one user (its tail ratio: the same for every length) against the
    run's P95 slowdown (each request's e2e over its own single-user time), since a mix's P95
    e2e is its longest requests' and the model's e2e its mean request's."""
    metric: LevelMetric = "slowdown" if measured.p95_slowdown else "e2e_ms"
    figures = measured.p95_slowdown if metric == "slowdown" else measured.p95_e2e_ms
    wanted = [(u, v) for u, v in figures if 1 <= u <= top and v > 0]
    if p.point is None or not wanted:
        return ()
    columns = [u - 1 for u, _ in wanted]

    def scaled(e2e: np.ndarray) -> np.ndarray:
        """The e2e grid as compared: ms, or over each parameter set's own e2e at one user."""
        return e2e / e2e[:, :1] if metric == "slowdown" else e2e

    point_grid = grid(Draws.point(p.fit.params, p.fit.step_shape), p.workload, top).e2e_ms
    point = scaled(point_grid)[0, columns]
    low = high = None
    if p.resamples:
        resampled = scaled(grid(draws(p.fit, p.resamples, p.widened_by), p.workload, top).e2e_ms)
        low, high = np.percentile(resampled[:, columns], [5, 95], axis=0, method="nearest")
    out = []
    for k, (users, meas) in enumerate(wanted):
        lo = None if low is None else min(float(low[k]), float(point[k]))
        hi = None if high is None else max(float(high[k]), float(point[k]))
        a, b = (lo, hi) if lo is not None and hi is not None else (point[k], point[k])
        out.append(
            LevelCheck(
                users=users,
                predicted=float(point[k]),
                low=lo,
                high=hi,
                measured_p95=meas,
                error=(float(point[k]) - meas) / meas,
                inside=bool(a <= meas <= b),
                metric=metric,
            )
        )
    return tuple(out)


def _measured_span(
    cap: int | None, past: int | None, levels: tuple[int, ...]
) -> tuple[int | None, int | None]:
    """Where the run's levels place a capacity (the span rule: :class:`~.facts.Agreement`)."""
    if cap is None:
        return None, None if past is None else past - 1
    if cap not in levels:
        return cap, cap
    above = [u for u in levels if u > cap]
    if above:
        return cap, above[0] - 1
    return cap, None if past is None else max(cap, past - 1)


def agreement(
    users: int | None,
    low: int | None,
    high: int | None,
    cap: int | None,
    past: int | None,
    levels: tuple[int, ...],
) -> Agreement:
    """A predicted figure (``users``, interval ``low``–``high``) against a measured capacity
    ``cap`` and the span the run's ``levels`` allow it."""
    low_m, high_m = _measured_span(cap, past, levels)
    inside = error = raw = None
    if users is not None and cap is not None and low_m is not None and cap > 0:
        lo, hi = low or users, high or users
        inside = hi >= low_m and (high_m is None or lo <= high_m)
        nearest = max(users, low_m) if high_m is None else min(max(users, low_m), high_m)
        error = (users - nearest) / cap
        raw = (users - cap) / cap
    return Agreement(cap, low_m, high_m, inside, error, raw)


def check(fit: CapacityFit, measured: MeasuredRun, params: KneeParams = DEFAULTS) -> Check:
    """``fit``'s prediction at ``measured``'s lengths and thresholds, against what it measured
    (see the module docstring). The prediction's resamples and level range are
    :func:`~.whatif.predict`'s defaults, the ones ``loadknee predict`` shows."""
    p = predict(fit, measured.workload, params, window=measured.gauge_window)
    point = p.point if p.point is not None and p.refusal is None else None
    bounds = modelled_bounds(p.memory_limit is not None)
    m = measured
    if m.deploy_bound == "memory" and m.deploy_bound in bounds:
        m = held_against(m, bounds)  # the one bound whose holding turns on the prediction
    deploy = agreement(
        None if point is None else point.users, p.low, p.high, m.capacity, m.past_users, m.levels
    )
    offline = agreement(
        None if point is None else point.offline_users,
        p.offline_low,
        p.offline_high,
        m.knee_capacity,
        m.knee_past_users,
        m.levels,
    )
    return Check(
        prediction=p,
        measured=m,
        deploy=deploy,
        offline=offline,
        levels=_level_checks(p, m, TOP_USERS) if p.refusal is None else (),
        deploy_against_knee=m.deploy_bound is not None and m.deploy_bound not in bounds,
    )
