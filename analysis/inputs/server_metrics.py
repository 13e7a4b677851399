"""Read raw ``server_metrics.csv`` samples as canonical server gauges and as DCGM GPU rows.

The sampler keeps every Prometheus sample raw (long form), whatever the server calls it; this
module names the few that the knee needs, for the servers we know. Mapping
(:data:`CANONICAL_METRICS`, in priority order — the first name present at a sample wins):

=========================  ====================  ==========================================
canonical column           server                metric name (scale)
=========================  ====================  ==========================================
``kv_cache_usage_pct``     vLLM                  ``vllm:kv_cache_usage_perc`` (0–1, × 100)
                           vLLM < 0.10           ``vllm:gpu_cache_usage_perc`` (0–1, × 100)
                           SGLang                ``sglang:token_usage`` (0–1, × 100)
``requests_running``       vLLM                  ``vllm:num_requests_running``
                           SGLang                ``sglang:num_running_reqs``
                           TGI                   ``tgi_batch_current_size``
                           llama.cpp             ``llamacpp:requests_processing``
``requests_waiting``       vLLM                  ``vllm:num_requests_waiting``
                           SGLang                ``sglang:num_queue_reqs``
                           TGI                   ``tgi_queue_size``
                           llama.cpp             ``llamacpp:requests_deferred``
``preemptions_total``      vLLM                  ``vllm:num_preemptions_total`` (a counter)
=========================  ====================  ==========================================

TGI and llama.cpp export no KV-cache gauge, and only vLLM counts preemptions: those columns
are NaN there (missing, never 0).

Several label sets of one metric at one sample are combined in two steps. First, label sets
that differ only in a replica label (:data:`REPLICA_LABELS`: ``tp_rank``, ``pp_rank``) are one
scheduler reported by each of its tensor/pipeline-parallel ranks (SGLang does this): their
**maximum** is taken, never their sum. Then the remaining sets (several ``model_name``,
data-parallel ``engine`` / ``dp_rank``) are combined: request counts and preemptions are
**summed** (they are the server's totals); KV-cache usage takes the **maximum** (a percentage
does not add up across caches, and the fullest cache is the one that preempts first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

import pandas as pd

from loadknee_core import dcgm
from loadknee_core.contract import GPU_COLUMNS
from loadknee_core.promtext import Sample, parse_labels, render_labels

CanonicalColumn = Literal[
    "kv_cache_usage_pct", "requests_running", "requests_waiting", "preemptions_total"
]
#: the timeline's value columns, in order
CANONICAL_COLUMNS: Final[tuple[str, ...]] = (
    "kv_cache_usage_pct",
    "requests_running",
    "requests_waiting",
    "preemptions_total",
)
#: columns of :func:`canonical_timeline`'s result
TIMELINE_COLUMNS: Final[tuple[str, ...]] = ("timestamp_unix_s", "endpoint", *CANONICAL_COLUMNS)


@dataclass(frozen=True)
class MetricMapping:
    """One server metric name read as one canonical column."""

    server: str
    metric: str
    column: CanonicalColumn
    scale: float = 1.0
    combine: Literal["sum", "max"] = "sum"


#: Known names, in priority order per column (see the module docstring).
CANONICAL_METRICS: Final[tuple[MetricMapping, ...]] = (
    MetricMapping("vllm", "vllm:kv_cache_usage_perc", "kv_cache_usage_pct", 100.0, "max"),
    MetricMapping("vllm<0.10", "vllm:gpu_cache_usage_perc", "kv_cache_usage_pct", 100.0, "max"),
    MetricMapping("sglang", "sglang:token_usage", "kv_cache_usage_pct", 100.0, "max"),
    MetricMapping("vllm", "vllm:num_requests_running", "requests_running"),
    MetricMapping("sglang", "sglang:num_running_reqs", "requests_running"),
    MetricMapping("tgi", "tgi_batch_current_size", "requests_running"),
    MetricMapping("llama.cpp", "llamacpp:requests_processing", "requests_running"),
    MetricMapping("vllm", "vllm:num_requests_waiting", "requests_waiting"),
    MetricMapping("sglang", "sglang:num_queue_reqs", "requests_waiting"),
    MetricMapping("tgi", "tgi_queue_size", "requests_waiting"),
    MetricMapping("llama.cpp", "llamacpp:requests_deferred", "requests_waiting"),
    MetricMapping("vllm", "vllm:num_preemptions_total", "preemptions_total"),
)

#: labels whose values only name a rank of one tensor/pipeline-parallel scheduler
REPLICA_LABELS: Final[frozenset[str]] = frozenset({"tp_rank", "pp_rank"})

_KEYS = ["timestamp_unix_s", "endpoint"]


def metric_names(server_metrics: pd.DataFrame | None) -> set[str]:
    """Every metric name the run scraped (empty without ``server_metrics.csv``). Which engine
    served the run and which prefix-cache counters it exports are both asked of this set: one
    reading (failed scrapes' empty names dropped, names as text) answers both the same way."""
    if server_metrics is None or server_metrics.empty or "metric" not in server_metrics:
        return set()
    return {str(name) for name in server_metrics["metric"].dropna().unique()}


def canonical_timeline(server_metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per scraped sample (timestamp, endpoint) with the canonical gauges.

    Takes the frame of ``server_metrics.csv`` (error rows are skipped); returns
    :data:`TIMELINE_COLUMNS`, sorted by time. Samples where none of the known names appear
    yield no row (e.g. a DCGM exporter's endpoint); an empty frame when nothing is known.
    """
    by_name = {m.metric: m for m in CANONICAL_METRICS}
    # the known names first: the run's other samples (histogram buckets, DCGM, …) are most of
    # the file, and cleaning every row (_good_samples) cost more than the timeline itself
    known = server_metrics[server_metrics["metric"].isin(list(by_name))]
    samples = _good_samples(known)
    if samples.empty:
        return pd.DataFrame({c: pd.Series(dtype=_dtype(c)) for c in TIMELINE_COLUMNS})
    cache: dict[str, str] = {}
    samples = samples.assign(
        scheduler=[_without_replica_labels(text, cache) for text in samples["labels"]]
    )
    per_metric: dict[str, pd.Series] = {}
    for name, group in samples.groupby("metric", sort=False):
        mapping = by_name[str(name)]
        per_scheduler = group.groupby([*_KEYS, "scheduler"], sort=False)["value"].max()
        combined = per_scheduler.groupby(level=_KEYS, sort=False).agg(mapping.combine, min_count=1)
        per_metric[mapping.metric] = combined * mapping.scale
    index = pd.MultiIndex.from_frame(samples[_KEYS].drop_duplicates())
    out = pd.DataFrame(
        {c: pd.Series(float("nan"), index=index, dtype="float64") for c in CANONICAL_COLUMNS}
    )
    for mapping in CANONICAL_METRICS:  # priority order: the first name present wins
        if mapping.metric in per_metric:
            found = per_metric[mapping.metric].reindex(index)
            out[mapping.column] = out[mapping.column].combine_first(found)
    out = out.reset_index().sort_values(_KEYS, kind="stable", ignore_index=True)
    return out[list(TIMELINE_COLUMNS)]


def gpu_from_dcgm(server_metrics: pd.DataFrame) -> pd.DataFrame:
    """``gpu.csv``-shaped rows (source ``dcgm``) from the raw DCGM samples of a run.

    For runs whose ``gpu.csv`` lacks them (``--llm-gpu none`` or ``nvml`` while the server's
    exporter was scraped anyway). Same mapping as the sampler
    (:mod:`loadknee_core.dcgm`), so both give identical numbers.
    """
    samples = _good_samples(server_metrics)
    samples = samples[samples["metric"].isin(list(dcgm.FIELDS))]
    rows: list[dict[str, object]] = []
    labels_cache: dict[str, dict[str, str]] = {}
    for (stamp, _endpoint), group in samples.groupby(_KEYS, sort=True):
        batch = [
            Sample(str(m), _labels(str(lab), labels_cache), float(v))
            for m, lab, v in zip(group["metric"], group["labels"], group["value"], strict=True)
        ]
        rows.extend(dcgm.gpu_rows(batch, float(stamp)))  # type: ignore[arg-type]
    frame = pd.DataFrame(rows, columns=list(GPU_COLUMNS))
    for column in GPU_COLUMNS:
        if column not in ("source", "error", "gpu_index"):
            frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    return frame


def _good_samples(server_metrics: pd.DataFrame) -> pd.DataFrame:
    """The rows that carry a sample: error rows dropped, values numeric, labels as text."""
    frame = server_metrics
    has_metric = frame["metric"].notna() & (frame["metric"].astype(str) != "")
    if "error" in frame:
        has_metric &= frame["error"].isna() | (frame["error"].astype(str) == "")
    frame = frame.loc[has_metric, ["timestamp_unix_s", "endpoint", "metric", "labels", "value"]]
    return frame.assign(
        timestamp_unix_s=pd.to_numeric(frame["timestamp_unix_s"], errors="coerce"),
        endpoint=frame["endpoint"].fillna("").astype(str),
        metric=frame["metric"].astype(str),
        labels=frame["labels"].fillna("").astype(str),
        value=pd.to_numeric(frame["value"], errors="coerce"),
    ).dropna(subset=["timestamp_unix_s"])


def _without_replica_labels(text: str, cache: dict[str, str]) -> str:
    """The label set with tp_rank/pp_rank removed: one key per scheduler."""
    if text not in cache:
        if not any(name in text for name in REPLICA_LABELS):
            cache[text] = text
        else:
            try:
                labels = parse_labels(text)
            except ValueError:
                cache[text] = text
            else:
                kept = {k: v for k, v in labels.items() if k not in REPLICA_LABELS}
                cache[text] = render_labels(kept)
    return cache[text]


def _labels(text: str, cache: dict[str, dict[str, str]]) -> dict[str, str]:
    if text not in cache:
        try:
            cache[text] = parse_labels(text)
        except ValueError:
            cache[text] = {}  # unreadable labels: counted as GPU 0 rather than dropped
    return cache[text]


def _dtype(column: str) -> str:
    return "str" if column == "endpoint" else "float64"
