"""The serving engines by their Prometheus names: which engine a run measured, and its gauges.

* **vLLM** — waiting ``vllm:num_requests_waiting``, running ``vllm:num_requests_running``,
  KV-cache use ``vllm:kv_cache_usage_perc`` (0–1; ``vllm:gpu_cache_usage_perc`` before 0.10);
* **SGLang** — ``sglang:num_queue_reqs``, ``sglang:num_running_reqs``, ``sglang:token_usage``;
* **TGI** — ``tgi_queue_size``, ``tgi_batch_current_size``; no KV-cache gauge;
* **llama.cpp** — ``llamacpp:requests_deferred``, ``llamacpp:requests_processing``; no KV-cache
  gauge.

The request-latency histograms (seconds) that the alert rules compare with the baseline:
vLLM ``vllm:e2e_request_latency_seconds``, SGLang ``sglang:e2e_request_latency_seconds``, TGI
``tgi_request_duration``; llama.cpp exports none (its latency alert is left out, with why).
The names agree with :data:`analysis.inputs.server_metrics.CANONICAL_METRICS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import pandas as pd

from analysis.inputs.server_metrics import metric_names


@dataclass(frozen=True)
class Engine:
    """One engine's metric names; ``None`` where it exports no such metric."""

    name: str  # vllm | sglang | tgi | llama.cpp
    label: str  # how people write it: vLLM, SGLang, TGI, llama.cpp
    waiting: str
    running: str
    kv_usage: str | None  # a 0–1 ratio
    latency_histogram: str | None  # seconds, without the _bucket suffix
    model_label: str | None  # the label naming the served model, to select one model


ENGINES: Final[tuple[Engine, ...]] = (
    Engine(
        "vllm",
        "vLLM",
        "vllm:num_requests_waiting",
        "vllm:num_requests_running",
        "vllm:kv_cache_usage_perc",
        "vllm:e2e_request_latency_seconds",
        "model_name",
    ),
    Engine(
        "sglang",
        "SGLang",
        "sglang:num_queue_reqs",
        "sglang:num_running_reqs",
        "sglang:token_usage",
        "sglang:e2e_request_latency_seconds",
        "model_name",
    ),
    Engine(
        "tgi", "TGI", "tgi_queue_size", "tgi_batch_current_size", None, "tgi_request_duration", None
    ),
    Engine(
        "llama.cpp",
        "llama.cpp",
        "llamacpp:requests_deferred",
        "llamacpp:requests_processing",
        None,
        None,
        None,
    ),
)
#: older vLLM (< 0.10) names its KV gauge differently; the rest is the same
VLLM_OLD_KV: Final = "vllm:gpu_cache_usage_perc"


def detect_engine(server_metrics: pd.DataFrame) -> Engine | None:
    """The engine whose running/waiting gauges the run scraped; None without server metrics."""
    names = metric_names(server_metrics)
    for engine in ENGINES:
        if engine.running in names or engine.waiting in names:
            if engine.name == "vllm" and engine.kv_usage not in names and VLLM_OLD_KV in names:
                return Engine(**{**engine.__dict__, "kv_usage": VLLM_OLD_KV})
            return engine
    return None


def served_model(server_metrics: pd.DataFrame, engine: Engine) -> str | None:
    """The model the engine's gauges name (vLLM's and SGLang's ``model_name`` label), if one."""
    if engine.model_label is None or server_metrics.empty:
        return None
    rows = server_metrics[server_metrics["metric"].astype(str) == engine.running]
    needle = f'{engine.model_label}="'
    for labels in rows["labels"].dropna().astype(str):
        start = labels.find(needle)
        if start >= 0:
            rest = labels[start + len(needle) :]
            return rest[: rest.find('"')] if '"' in rest else None
    return None
