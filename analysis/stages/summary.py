"""Per-stage summary (the record table): one row per stage over its measured window only.

Rows counted: ``phase == "measure"`` for step stages and ``phase == "baseline"`` for the baseline
stage; warm-up and cooldown rows are left out. Of those, ``ok`` rows feed every latency and
throughput statistic; ``length_mismatch`` rows (or rows whose ``length_ok`` is 0) are counted and
excluded; ``cancelled`` rows (our own stop cut them) are left out entirely; every other outcome is
an error. Percentiles are exact, computed from the raw rows with linear interpolation
(:data:`analysis.model.PERCENTILE_METHOD`); rates divide by the measured window's length from
``stages.csv`` (from the rows' own span when the window was never closed). Rates count each served
request in proportion to the part of it inside the window (see :func:`window_rates`). Telemetry
(GPU, server metrics, client CPU) is cut to the same window; missing telemetry gives NaN, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from analysis.inputs.load import Run
from analysis.inputs.server_metrics import canonical_timeline, gpu_from_dcgm
from analysis.model import SUMMARY_COLUMNS
from analysis.stages.array_intervals import stage_batches
from analysis.stages.client_queue import CLIENT_QUEUE_COLUMNS, client_queue_columns
from analysis.stages.groups import StageGroups
from analysis.stages.intervals import IntervalParams, StageBatches, interval_columns
from analysis.stages.levels import level_mask
from analysis.stages.median_interval import median_interval
from analysis.stages.prefix_cache import stage_prefix_cache
from analysis.stages.refusals import stage_refusals
from analysis.stages.row_classes import (
    CANCELLED,
    CLASSES,
    ERROR,
    MEASURED_PHASES,
    MISMATCH,
    OK,
    RowClasses,
    run_classes,
)
from analysis.stages.slowdown import SingleUserLine, single_user_line, slowdowns

#: a GPU sample at or below this utilisation counts as idle ("utilisation drops to 0")
IDLE_UTIL_PCT = 5.0
#: the ``cls`` column's type: the four class names as categories, so comparing a million rows
#: to "ok" compares small integer codes, and the codes come back without classifying again
CLASS_DTYPE = pd.CategoricalDtype(list(CLASSES))


def measured_requests(run: Run, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Rows of the measured windows, with a ``cls`` column (:data:`CLASS_DTYPE`: ``ok`` /
    ``length_mismatch`` / ``error`` / ``cancelled``, a length_ok of 0 a mismatch; ``cancelled``
    rows, the load generator stopping the user mid-request, say nothing about the server: no
    statistic, count or error rate includes them) from the run's
    :func:`~analysis.stages.row_classes.run_classes`: one boolean mask over the rows, no text
    compared again. ``columns``: only these of the
    run's columns (those it has), for a caller that reads no others: copying a million rows'
    every column is most of the cost."""
    classes = run_classes(run)
    requests = run.requests
    if columns is not None:
        requests = requests[[c for c in dict.fromkeys(columns) if c in requests]]
    rows = requests[classes.measured]
    cls = pd.Categorical.from_codes(classes.code[classes.measured], dtype=CLASS_DTYPE)
    return rows.assign(cls=pd.Series(cls, index=rows.index))


def measured_codes(measured: pd.DataFrame) -> np.ndarray:
    """The class codes (:data:`~analysis.stages.row_classes.CLASSES`) of
    :func:`measured_requests`' rows: its categorical ``cls`` column's own codes. Any other
    ``cls`` column is read by name; a missing name or one that is no class reads as
    ``cancelled``: counted nowhere."""
    cls = measured["cls"]
    if isinstance(cls.dtype, pd.CategoricalDtype) and list(cls.dtype.categories) == list(CLASSES):
        code = cls.cat.codes.to_numpy()
    else:
        code = pd.Index(CLASSES).get_indexer(pd.Index(cls))
    return np.where(code < 0, CANCELLED, code).astype(np.int8)


def stage_windows(run: Run, measured: pd.DataFrame) -> pd.DataFrame:
    """Per stage: ``window_start``/``window_end`` unix s (from stages.csv, else the rows' span)."""
    stages = run.stages.set_index("stage")
    start = stages["warmup_end_unix_s"].fillna(stages["start_unix_s"])
    end = stages["measure_end_unix_s"]
    if start.isna().any() or end.isna().any():  # a window never closed: the rows' own span
        span = measured.groupby("stage").agg(
            first=("start_unix_s", "min"), last=("end_unix_s", "max")
        )
        start = start.fillna(span["first"].reindex(stages.index))
        end = end.fillna(span["last"].reindex(stages.index))
    return pd.DataFrame({"window_start": start, "window_end": end})


def run_batches(
    run: Run, *, params: IntervalParams | None = None, measured: pd.DataFrame | None = None
) -> dict[int, StageBatches]:
    """Each stage's per-window data (:mod:`analysis.stages.array_intervals`), for the knee's
    resampling
    (``measured``: :func:`measured_requests` of ``run`` when the caller already has them)."""
    measured = measured_requests(run) if measured is None else measured
    windows = stage_windows(run, measured)
    return stage_batches(
        run.requests,
        windows,
        measured_phases=MEASURED_PHASES,
        params=params,
        classes=run_classes(run),
        slowdown=run_slowdowns(run, run_line(run, measured)),
    )


def _window_mask(ts: pd.Series, start: float, end: float) -> pd.Series:
    return (ts >= start) & (ts <= end)


#: the GPU figures of a window (:func:`_gpu_stats`), NaN without samples
GPU_FIGURES = ("gpu_idle_pct", "gpu_mem_peak_pct", "gpu_util_mean_pct", "sm_util_mean_pct")


def _gpu_stats(gpu: pd.DataFrame, start: float, end: float) -> dict[str, float]:
    if gpu.empty:  # no GPU telemetry: what the figures below give, without pandas per stage
        return dict.fromkeys(GPU_FIGURES, float("nan"))
    rows = gpu[_window_mask(gpu["timestamp_unix_s"], start, end)]
    mem_pct = rows["memory_used_mib"] / rows["memory_total_mib"] * 100.0
    util = rows["gpu_util_pct"].dropna()
    idle = float((util <= IDLE_UTIL_PCT).mean() * 100.0) if len(util) else float("nan")
    return {
        "gpu_idle_pct": idle,
        "gpu_mem_peak_pct": float(mem_pct.max()),
        "gpu_util_mean_pct": float(rows["gpu_util_pct"].mean()),
        "sm_util_mean_pct": float(rows["sm_util_pct"].mean()),
    }


def _counter_increase(values: pd.Series) -> float:
    """Increase of a monotonic counter over samples, robust to resets (server restarts)."""
    values = values.dropna()
    if len(values) < 2:
        return float("nan")
    return float(values.diff().clip(lower=0).sum())


def _server_stats(timeline: pd.DataFrame | None, start: float, end: float) -> dict[str, float]:
    nan = float("nan")
    names = (
        "kv_cache_peak_pct",
        "waiting_mean",
        "waiting_max",
        "running_max",
        "running_mean",
        "preemptions",
    )
    if timeline is None or timeline.empty:
        return dict.fromkeys(names, nan)
    rows = timeline[_window_mask(timeline["timestamp_unix_s"], start, end)]
    if rows.empty:
        return dict.fromkeys(names, nan)
    per = rows.sort_values("timestamp_unix_s").groupby("endpoint")
    # several endpoints (replicas): queues add up; the fullest cache is the one that matters
    waiting_means = per["requests_waiting"].mean()
    preempt = per["preemptions_total"].apply(_counter_increase)
    return {
        "kv_cache_peak_pct": float(rows["kv_cache_usage_pct"].max()),
        "waiting_mean": float(waiting_means.sum(min_count=1)),
        "waiting_max": float(per["requests_waiting"].max().sum(min_count=1)),
        "running_max": float(per["requests_running"].max().sum(min_count=1)),
        "running_mean": float(per["requests_running"].mean().sum(min_count=1)),
        "preemptions": float(preempt.sum(min_count=1)),
    }


def _client_peak(client: pd.DataFrame, start: float, end: float) -> float:
    if client.empty:
        return float("nan")
    rows = client[_window_mask(client["timestamp_unix_s"], start, end)]
    return float(rows["cpu_pct"].max())


#: the fewest senders' client.csv rows (0.5 s apart) a window's lateness is read from: one or two
#: rows can be a process's start alone (its imports, its users spawning: a 0.5 s baseline beside
#: a test suite read 22.5 ms mean lag, up to 187 ms, with its requests as fast as the next stage's)
MIN_LAG_ROWS = 3
#: the load generator's lateness over a window (:func:`_client_lag`), NaN without lag samples
CLIENT_LAG_FIGURES = (
    "client_lag_mean_ms",
    "client_lag_p95_ms",
    "client_lag_max_ms",
    "host_load_1m",
    "host_cpus",
)


def _client_lag(client: pd.DataFrame, start: float, end: float) -> dict[str, float]:
    """How late the load generator itself was over the window, from the ``client.csv`` rows of
    the processes that send requests: the mean of their rows' mean event-loop lag (the delay an
    average send or token stamp saw: the rule's figure), and the P95 and max of each row's
    largest lag (its stalls); with the host load and CPU count of the row with the most load per
    CPU (docs/method.md: Late load generator). A distributed run's master sends nothing, so its
    rows are left out where workers wrote any (its loop stalls while it serves the web UI or
    starts the workers, 30-40 ms beside a test suite, and no request waits on it). Files from
    before the lag columns, and windows with fewer than :data:`MIN_LAG_ROWS` rows, give NaN for
    the lag (too few samples to tell lateness from a start-up stall)."""
    out = dict.fromkeys(CLIENT_LAG_FIGURES, float("nan"))
    if client.empty or "loop_lag_max_ms" not in client:
        return out
    rows = client[_window_mask(client["timestamp_unix_s"], start, end)]
    if "worker" in rows:
        senders = rows["worker"].astype(str) != "master"
        if senders.any():
            rows = rows[senders]
    lag = rows["loop_lag_max_ms"].dropna().to_numpy(dtype=float)
    if len(lag) >= MIN_LAG_ROWS:
        out["client_lag_p95_ms"] = float(np.percentile(lag, 95))
        out["client_lag_max_ms"] = float(lag.max())
    if "loop_lag_mean_ms" in rows:
        mean = rows["loop_lag_mean_ms"].dropna().to_numpy(dtype=float)
        if len(mean) >= MIN_LAG_ROWS:
            out["client_lag_mean_ms"] = float(mean.mean())
    load = rows["host_load_1m"].to_numpy(dtype=float)
    cpus = rows["host_cpus"].to_numpy(dtype=float)
    per_cpu = load / cpus
    if np.isfinite(per_cpu).any():
        busiest = int(np.nanargmax(np.where(np.isfinite(per_cpu), per_cpu, np.nan)))
        out["host_load_1m"], out["host_cpus"] = float(load[busiest]), float(cpus[busiest])
    return out


def window_places(stages: pd.Index, stage: np.ndarray) -> np.ndarray:
    """Per row (its ``stage``), the place of its stage in ``stages`` (unique stage numbers),
    -1 for a stage not there: a search among the few stages, not a hash of every row."""
    labels = stages.to_numpy()
    if len(labels) == 0:
        return np.full(len(stage), -1, dtype=np.int64)
    sorter = np.argsort(labels, kind="stable")
    found = np.minimum(np.searchsorted(labels, stage, sorter=sorter), len(labels) - 1)
    place = sorter[found]
    return np.where(labels[place] == stage, place, -1)


def window_rates(
    requests: pd.DataFrame, windows: pd.DataFrame, classes: RowClasses | None = None
) -> pd.DataFrame:
    """Served requests, completion and total tokens per second of each stage's window.

    Each ok request of the stage (any phase) counts in proportion to the part of its generation
    (from its first token when TTFT is known, else from its start, to its end) that lies inside
    the window: a request half inside counts half. Over a long window this equals counting the
    requests that started in it; over a short one it is free of the quantisation that batches
    finishing together cause (one batch more or less in a 2 s window is ±30 %). ``classes``:
    the rows' :class:`~analysis.stages.row_classes.RowClasses` when already known.
    """
    place = window_places(windows.index, requests["stage"].to_numpy())
    take = (classes or RowClasses.of(requests)).ok & (place >= 0)
    place = place[take]

    def ok(column: str) -> np.ndarray:
        return requests[column].to_numpy()[take]

    w_start = windows["window_start"].to_numpy()[place]
    w_end = windows["window_end"].to_numpy()[place]
    start = ok("start_unix_s") + np.nan_to_num(ok("ttft_ms")) / 1000.0
    end = ok("end_unix_s")
    start = np.minimum(start, end)
    overlap = np.clip(np.minimum(end, w_end) - np.maximum(start, w_start), 0.0, None)
    length = end - start
    inside = (start >= w_start) & (end <= w_end)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(length > 0, overlap / length, inside.astype(float))
    completion = ok("completion_tokens")
    parts = pd.DataFrame(
        {
            "stage": ok("stage"),
            "served": share,
            "completion": share * completion,
            "total": share * (ok("prompt_tokens") + completion),
        }
    )
    sums = parts.groupby("stage").sum(min_count=1).reindex(windows.index)
    seconds = windows["window_end"] - windows["window_start"]
    return pd.DataFrame(
        {
            "qps": sums["served"] / seconds,
            "output_tok_s": sums["completion"] / seconds,
            "total_tok_s": sums["total"] / seconds,
        }
    )


#: per column of the ok rows, the percentiles the record table takes and their column names
QUANTILES: dict[str, tuple[tuple[float, str], ...]] = {
    "e2e_ms": ((0.5, "e2e_p50_ms"), (0.95, "e2e_p95_ms"), (0.99, "e2e_p99_ms")),
    "ttft_ms": ((0.5, "ttft_p50_ms"), (0.95, "ttft_p95_ms"), (0.99, "ttft_p99_ms")),
    "itl_p50_ms": ((0.5, "itl_p50_ms"),),
    "itl_p95_ms": ((0.95, "itl_p95_ms"),),
    "tpot_ms": ((0.5, "tpot_p50_ms"), (0.95, "tpot_p95_ms")),
    "s_per_1k_total": (
        (0.5, "s_per_1k_total_tokens"),
        (0.95, "s_per_1k_total_p95"),
        (0.99, "s_per_1k_total_p99"),
    ),
    "s_per_1k_completion": ((0.5, "s_per_1k_completion_tokens"),),
    "slowdown": ((0.5, "slowdown_p50"), (0.95, "slowdown_p95"), (0.99, "slowdown_p99")),
}


def _floats(frame: pd.DataFrame, column: str, rows: np.ndarray) -> np.ndarray:
    return frame[column].to_numpy(dtype=float)[rows]


def _per_token(e2e_ms: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Seconds per 1000 tokens (ms per token); NaN where no token was counted."""
    return e2e_ms / np.where(tokens > 0, tokens, np.nan)


def yardstick_stage(kinds: pd.Series, served: pd.Series) -> int | None:
    """The stage the single-user figures come from, as the baseline picks it
    (:func:`analysis.stages.baseline.compute_baseline`): the first ``baseline`` stage that
    served, else the first level that did (``kinds``, ``served``: per stage id, its kind and
    its ok count)."""
    served = served.reindex(kinds.index).fillna(0)
    levels = pd.Series(level_mask(kinds.to_frame("kind")), index=kinds.index)
    for wanted in (kinds == "baseline", levels):
        hit = kinds.index[wanted.to_numpy(dtype=bool) & (served.to_numpy() > 0)]
        if len(hit):
            return int(sorted(hit)[0])
    return None


def run_line(run: Run, measured: pd.DataFrame) -> SingleUserLine | None:
    """The run's single-user line (:mod:`analysis.stages.slowdown`), fitted on the ok measured
    rows of its :func:`yardstick_stage`."""
    ok = measured_codes(measured) == OK
    stage = measured["stage"].to_numpy(dtype=float)
    labels, counts = np.unique(stage[ok], return_counts=True)
    kinds = run.stages.set_index("stage")["kind"]
    single = yardstick_stage(kinds, pd.Series(counts, index=labels.astype(int)))
    rows = ok & (stage == single)
    e2e, prompt, completion = (
        _floats(measured, column, rows)
        for column in ("e2e_ms", "prompt_tokens", "completion_tokens")
    )
    return single_user_line(e2e, prompt, completion)


def run_slowdowns(run: Run, line: SingleUserLine | None) -> np.ndarray | None:
    """Each row of ``run.requests``' slowdown against ``line`` (None without a line)."""
    if line is None:
        return None
    rows = run.requests
    return slowdowns(
        line,
        rows["e2e_ms"].to_numpy(dtype=float),
        rows["prompt_tokens"].to_numpy(dtype=float),
        rows["completion_tokens"].to_numpy(dtype=float),
    )


def _request_stats(measured: pd.DataFrame, line: SingleUserLine | None = None) -> pd.DataFrame:
    """Counts, rates' numerators and exact percentiles per stage from the raw rows (index: the
    stages with measured rows), on arrays: the class codes of the ``cls`` column, the rows put
    in stage order once (:class:`~analysis.stages.groups.StageGroups`). ``line``: the run's
    single-user line each request's slowdown is held against (:func:`run_line`); without it
    no slowdown is read."""
    code = measured_codes(measured)
    stage = measured["stage"].to_numpy(dtype=float)
    every = StageGroups(stage)
    counts = every.counts(code, len(CLASSES))
    out = pd.DataFrame(
        {
            "requests": counts[:, [OK, MISMATCH, ERROR]].sum(axis=1),
            "ok": counts[:, OK],
            "errors": counts[:, ERROR],
            "length_mismatch": counts[:, MISMATCH],
        },
        index=pd.Index(every.labels, name="stage"),
    )
    # NaN where the rows predate the column (or come from another tool): unknown, not zero
    resent = measured["resent"] if "resent" in measured else pd.Series(np.nan, measured.index)
    out["resent"] = resent.groupby(measured["stage"]).sum(min_count=1)
    ok = code == OK
    e2e = _floats(measured, "e2e_ms", ok)
    prompt = _floats(measured, "prompt_tokens", ok)
    completion = _floats(measured, "completion_tokens", ok)
    ok_stage = stage[ok]
    by_stage = pd.DataFrame(
        {"e2e_ms": e2e, "prompt_tokens": prompt, "completion_tokens": completion}
    ).groupby(ok_stage)
    out["e2e_mean_ms"] = by_stage["e2e_ms"].mean()
    out["prompt_tokens_max"] = by_stage["prompt_tokens"].max()
    out["completion_tokens_max"] = by_stage["completion_tokens"].max()
    values = {
        "e2e_ms": e2e,
        "ttft_ms": _floats(measured, "ttft_ms", ok),
        "itl_p50_ms": _floats(measured, "itl_p50_ms", ok),
        "itl_p95_ms": _floats(measured, "itl_p95_ms", ok),
        "tpot_ms": _floats(measured, "tpot_ms", ok),
        "s_per_1k_total": _per_token(e2e, prompt + completion),
        "s_per_1k_completion": _per_token(e2e, completion),
        "slowdown": slowdowns(line, e2e, prompt, completion),
    }
    served = StageGroups(ok_stage)
    index = pd.Index(served.labels)
    for column, wanted in QUANTILES.items():
        qs = served.quantiles(values[column], [q for q, _ in wanted])
        for j, (_q, name) in enumerate(wanted):
            out[name] = pd.Series(qs[:, j], index=index)
    out[["e2e_p50_low_ms", "e2e_p50_high_ms"]] = _median_bounds(served, e2e, index)
    return out


def _median_bounds(served: StageGroups, e2e: np.ndarray, index: pd.Index) -> pd.DataFrame:
    """Per served stage, its e2e median's :func:`~analysis.stages.median_interval.median_interval`
    (NaN for too few requests)."""
    ordered = e2e[served.order]
    bounds = [
        median_interval(ordered[served.bounds[g] : served.bounds[g + 1]])
        for g in range(len(served))
    ]
    return pd.DataFrame(
        [(math.nan, math.nan) if b is None else b for b in bounds],
        index=index,
        columns=["e2e_p50_low_ms", "e2e_p50_high_ms"],
        dtype=float,
    )


def summarize_stages(
    run: Run,
    *,
    timeline: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
    intervals: IntervalParams | None = None,
    measured: pd.DataFrame | None = None,
    batches: dict[int, StageBatches] | None = None,
) -> pd.DataFrame:
    """The record table: one row per stage of ``stages.csv``, columns ``model.SUMMARY_COLUMNS``.

    ``timeline`` turns the long-form server metrics into the canonical per-sample timeline
    (default: :func:`analysis.inputs.server_metrics.canonical_timeline`). When ``gpu.csv`` is
    empty, GPU figures come from DCGM samples among the server metrics, if any. The interval
    columns come from :mod:`analysis.stages.intervals` (``intervals``: its parameters). A caller
    that
    already has the run's :func:`measured_requests` or :func:`run_batches` (same ``intervals``)
    passes them as ``measured``/``batches`` instead of having them computed again.
    """
    measured = measured_requests(run) if measured is None else measured
    windows = stage_windows(run, measured)
    line = run_line(run, measured)
    stats = _request_stats(measured, line).reindex(windows.index)
    classes = run_classes(run)
    rates = window_rates(run.requests, windows, classes).to_dict("index")
    if batches is None:
        batches = stage_batches(
            run.requests,
            windows,
            measured_phases=MEASURED_PHASES,
            params=intervals,
            classes=classes,
            slowdown=run_slowdowns(run, line),
        )
    bands = interval_columns(batches, params=intervals).to_dict("index")
    canon, gpu = None, run.gpu
    if not run.server_metrics.empty:
        canon = (timeline or canonical_timeline)(run.server_metrics)
        if gpu.empty:  # GPU telemetry scraped from a DCGM exporter only
            gpu = gpu_from_dcgm(run.server_metrics)
    stages = run.stages.set_index("stage")
    prefix_cache = stage_prefix_cache(run.server_metrics, windows)
    refusals = stage_refusals(measured)
    rows = []
    for stage, start, end in zip(
        windows.index, windows["window_start"], windows["window_end"], strict=True
    ):
        window_s = end - start if end > start else float("nan")
        st = stats.loc[stage]
        row: dict[str, object] = {
            "stage": int(stage),
            "kind": stages.at[stage, "kind"],
            "target_users": stages.at[stage, "target_users"],
            "batch_size": stages.at[stage, "batch_size"],
            "window_s": window_s,
        }
        for name in ("requests", "ok", "errors", "length_mismatch"):
            row[name] = 0 if pd.isna(st[name]) else int(st[name])
        served = row["ok"] + row["errors"]  # type: ignore[operator]
        row["success_pct"] = row["ok"] / served * 100.0 if served else np.nan  # type: ignore[operator]
        for name in ("qps", "output_tok_s", "total_tok_s"):
            value = rates[stage][name]
            # nothing served while requests were sent is a measured 0, not missing data
            row[name] = 0.0 if served and row["ok"] == 0 and pd.isna(value) else value
        for name in SUMMARY_COLUMNS:
            if name not in row and name in st.index:
                row[name] = st[name]
        row.update(_gpu_stats(gpu, start, end))
        row.update(_server_stats(canon, start, end))
        row["client_cpu_peak_pct"] = _client_peak(run.client, start, end)
        row.update(_client_lag(run.client, start, end))
        row.update(prefix_cache.loc[stage].to_dict())
        refused = refusals.get(int(stage))
        row["refused"] = 0 if refused is None else refused.refused
        row.update({str(k): v for k, v in bands.get(stage, {}).items()})
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    for name in ("stage", "requests", "ok", "errors", "length_mismatch"):
        frame[name] = frame[name].astype("int64")
    for name in SUMMARY_COLUMNS:
        if name not in ("stage", "kind", "requests", "ok", "errors", "length_mismatch"):
            frame[name] = frame[name].astype("float64")
    if frame["target_users"].notna().all():
        frame["target_users"] = frame["target_users"].astype("int64")
    queue = client_queue_columns(run.requests, windows, frame, classes=classes)
    queue = queue.reindex(frame["stage"])
    for name in CLIENT_QUEUE_COLUMNS:
        frame[name] = queue[name].to_numpy(dtype=float)
    return frame
