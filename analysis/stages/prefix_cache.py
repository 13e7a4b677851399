"""Each stage's prefix-cache hit rate, from the server's own counters over the measured window.

Servers count prefix caching in tokens: how many prompt tokens were looked up (*queries*) and
how many were found cached (*hits*). The hit rate of a stage is the increase of hits over the
increase of queries between the first and the last scrape inside its measured window (a drop, a
restart, counts from zero), never the cumulative ratio, so an earlier stage's hits do not
flatter a later one; nor does a scrape outside the window (interpolating to the window's edges
would mix in the warm-up's and the calibration probes' lookups). A window with fewer than two
scrapes inside has no hit rate (NaN). Names (:data:`PREFIX_CACHE_COUNTERS`, the
first pair the run scraped wins):

==================  ========================================  ====================================
server              queries                                   hits
==================  ========================================  ====================================
vLLM (V1)           ``vllm:prefix_cache_queries_total``       ``vllm:prefix_cache_hits_total``
vLLM (deprecated)   ``vllm:gpu_prefix_cache_queries_total``   ``vllm:gpu_prefix_cache_hits_total``
SGLang              ``sglang:prompt_tokens_total``            ``sglang:cached_tokens_total``
==================  ========================================  ====================================

For SGLang the prompt-token counter stands in for the queries (it counts every prompt token,
cached or not). Label sets of one name at one scrape (model names, engines, SGLang's
``cache_source``) are summed. A server that exports none of these (TGI, llama.cpp, a run
without ``/metrics``) gives NaN and :func:`analysis.report.workload_words.source_note` says
so: missing, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import pandas as pd

from analysis.inputs.server_metrics import metric_names

#: columns :func:`stage_prefix_cache` returns (the record table's prefix-cache columns)
PREFIX_CACHE_COLUMNS: Final[tuple[str, ...]] = (
    "prefix_cache_queries",
    "prefix_cache_hits",
    "prefix_cache_hit_pct",
)


@dataclass(frozen=True)
class CacheCounters:
    server: str
    queries: str
    hits: str


PREFIX_CACHE_COUNTERS: Final[tuple[CacheCounters, ...]] = (
    CacheCounters("vllm", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"),
    CacheCounters(
        "vllm (deprecated names)",
        "vllm:gpu_prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_hits_total",
    ),
    CacheCounters("sglang", "sglang:prompt_tokens_total", "sglang:cached_tokens_total"),
)


def counters_found(server_metrics: pd.DataFrame) -> CacheCounters | None:
    """The first counter pair of :data:`PREFIX_CACHE_COUNTERS` the run scraped, or None."""
    names = metric_names(server_metrics)
    for pair in PREFIX_CACHE_COUNTERS:
        if pair.queries in names and pair.hits in names:
            return pair
    return None


def _series(server_metrics: pd.DataFrame, metric: str) -> dict[str, pd.Series]:
    """Per endpoint: the counter's value at each scrape (label sets summed), sorted by time."""
    rows = server_metrics[server_metrics["metric"] == metric]
    if "error" in rows:
        rows = rows[rows["error"].isna() | (rows["error"].astype(str) == "")]
    rows = rows.assign(
        timestamp_unix_s=pd.to_numeric(rows["timestamp_unix_s"], errors="coerce"),
        value=pd.to_numeric(rows["value"], errors="coerce"),
        endpoint=rows["endpoint"].fillna("").astype(str),
    ).dropna(subset=["timestamp_unix_s", "value"])
    out = {}
    for endpoint, group in rows.groupby("endpoint", sort=True):
        out[str(endpoint)] = group.groupby("timestamp_unix_s")["value"].sum().sort_index()
    return out


def _increase(series: pd.Series, start: float, end: float) -> float:
    """The counter's increase between the first and the last scrape inside ``[start, end]``
    (a drop, a restart, counts from zero); NaN with fewer than two scrapes inside."""
    inside = series[(series.index >= start) & (series.index <= end)]
    vs = inside.to_numpy(dtype=float)
    if len(vs) < 2:
        return float("nan")
    steps = np.diff(vs)
    return float(np.where(steps < 0, vs[1:], steps).sum())


def _counts(
    queries: dict[str, pd.Series], hits: dict[str, pd.Series], start: float, end: float
) -> dict[str, float]:
    """Queries, hits (tokens) and hit % over ``[start, end]``, summed over endpoints, from the
    counters' :func:`_series`."""
    nan = float("nan")
    q_parts = [_increase(s, start, end) for s in queries.values()]
    h_parts = [_increase(s, start, end) for s in hits.values()]
    q = float(np.sum(q_parts)) if q_parts and not np.isnan(q_parts).any() else nan
    h = float(np.sum(h_parts)) if h_parts and not np.isnan(h_parts).any() else nan
    pct = h / q * 100.0 if q == q and h == h and q > 0 else nan
    return {"prefix_cache_queries": q, "prefix_cache_hits": h, "prefix_cache_hit_pct": pct}


def stage_prefix_cache(server_metrics: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """Per stage (``windows``' index; ``window_start``/``window_end`` columns) the
    :data:`PREFIX_CACHE_COLUMNS`; all NaN when the server exposes no prefix-cache counters.
    Each counter's series is cut from the long-form metrics once, not once per stage."""
    pair = counters_found(server_metrics)
    nan = dict.fromkeys(PREFIX_CACHE_COLUMNS, float("nan"))
    if pair is not None:
        queries, hits = _series(server_metrics, pair.queries), _series(server_metrics, pair.hits)
    rows = {
        stage: nan if pair is None else _counts(queries, hits, float(start), float(end))
        for stage, start, end in zip(
            windows.index, windows["window_start"], windows["window_end"], strict=True
        )
    }
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=list(PREFIX_CACHE_COLUMNS))
    return frame.astype("float64")


def hit_miss_ttft(requests: pd.DataFrame) -> pd.DataFrame:
    """Per stage, from the requests whose server reported ``cached_tokens``: served measured
    rows that hit the prefix cache (any cached token) and missed, with their TTFT P50 (ms).
    Empty when no request carries the count."""
    columns = ["stage", "hits", "misses", "hit_ttft_p50_ms", "miss_ttft_p50_ms"]
    if "cached_tokens" not in requests:
        return pd.DataFrame(columns=columns)
    rows = requests[
        (requests["outcome"] == "ok")
        & requests["phase"].isin(("measure", "baseline"))
        & requests["cached_tokens"].notna()
    ]
    out = []
    for stage, group in rows.groupby("stage"):
        hit = group["cached_tokens"] > 0
        out.append({
            "stage": int(float(str(stage))),
            "hits": int(hit.sum()),
            "misses": int((~hit).sum()),
            "hit_ttft_p50_ms": float(group.loc[hit, "ttft_ms"].median()),
            "miss_ttft_p50_ms": float(group.loc[~hit, "ttft_ms"].median()),
        })  # fmt: skip
    return pd.DataFrame(out, columns=columns)
