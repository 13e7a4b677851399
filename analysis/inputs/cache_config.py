"""The engine's memory settings as it states them: ``vllm:cache_config_info``'s labels.

vLLM exports its cache configuration as an info metric (value 1, the settings as labels:
``block_size``, ``num_gpu_blocks``, ``enable_prefix_caching``, ``gpu_memory_utilization`` …);
the simulator exports the same; SGLang states its token pool as a gauge,
``sglang:max_total_num_tokens``. Why read them: the KV pool in tokens (``num_gpu_blocks`` ×
``block_size``, the figure vLLM's own log turns into "maximum concurrency for N tokens per
request") is fixed for a server's life, so advice built on it is the same for every run of
that server, where advice built on a sampled KV gauge's peak moves with when the samples fell.
"""

from __future__ import annotations

import pandas as pd

from loadknee_core.promtext import parse_labels

#: the info metric that carries the engine's cache settings
CACHE_CONFIG_METRIC = "vllm:cache_config_info"
#: SGLang's token pool, a gauge of its own (older SGLang versions export it)
SGLANG_POOL_METRIC = "sglang:max_total_num_tokens"


def cache_config_labels(server_metrics: pd.DataFrame) -> dict[str, dict[str, str]]:
    """Per scraped endpoint, the labels of its last readable ``vllm:cache_config_info`` sample
    (empty: not exported, or no ``server_metrics.csv``)."""
    if server_metrics.empty or "metric" not in server_metrics:
        return {}
    rows = server_metrics[server_metrics["metric"] == CACHE_CONFIG_METRIC]
    out: dict[str, dict[str, str]] = {}
    # the last sample first, and each endpoint's first readable one kept: a run scrapes the same
    # label text hundreds of times, and parsing it is the costly part
    pairs = zip(rows["endpoint"].astype(str), rows["labels"], strict=True)
    for endpoint, text in reversed(list(pairs)):
        if endpoint in out or not isinstance(text, str):
            continue
        try:
            out[endpoint] = parse_labels(text)
        except ValueError:
            continue  # an unreadable sample: an earlier one may do
    return out


def _pool(labels: dict[str, str]) -> int | None:
    try:
        if "num_gpu_blocks" in labels and "block_size" in labels:
            tokens = int(float(labels["num_gpu_blocks"])) * int(float(labels["block_size"]))
        elif "num_gpu_tokens" in labels:  # the simulator before it exported blocks
            tokens = int(float(labels["num_gpu_tokens"]))
        else:
            return None
    except ValueError:  # "None" before the engine profiled its memory
        return None
    return tokens if tokens > 0 else None


def _sglang_pools(server_metrics: pd.DataFrame) -> dict[str, int | None]:
    """Per endpoint, SGLang's ``sglang:max_total_num_tokens`` gauge (its token pool; several
    tensor-parallel ranks report the same pool: their largest)."""
    if server_metrics.empty or "metric" not in server_metrics:
        return {}
    rows = server_metrics[server_metrics["metric"] == SGLANG_POOL_METRIC]
    values = pd.to_numeric(rows["value"], errors="coerce")
    out: dict[str, int | None] = {}
    for endpoint, value in values.groupby(rows["endpoint"].astype(str)).max().items():
        out[str(endpoint)] = int(value) if pd.notna(value) and value > 0 else None
    return out


def kv_pool_tokens(server_metrics: pd.DataFrame) -> int | None:
    """The KV-cache pool in tokens across the scraped endpoints (their sum: one server per
    endpoint), or None where any endpoint did not say."""
    pools = {
        endpoint: _pool(labels) for endpoint, labels in cache_config_labels(server_metrics).items()
    }
    pools.update({e: p for e, p in _sglang_pools(server_metrics).items() if pools.get(e) is None})
    if not pools or any(p is None for p in pools.values()):
        return None
    return sum(p for p in pools.values() if p is not None)


def prefix_caching_label(server_metrics: pd.DataFrame) -> str | None:
    """``enable_prefix_caching`` as the server states it (lower case), if any endpoint does."""
    for labels in cache_config_labels(server_metrics).values():
        if "enable_prefix_caching" in labels:
            return labels["enable_prefix_caching"].lower()
    return None
