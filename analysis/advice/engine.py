"""Which engine served the run, and its spelling of the concurrency limit.

Detected from the server's metric names in ``server_metrics.csv`` (``vllm:``, ``sglang:``,
``tgi_``, ``llamacpp:``), or ``run.json``'s ``server.engine`` when the load side recorded one.
Every engine names its concurrency cap its own way: vLLM ``--max-num-seqs``, SGLang
``--max-running-requests``, TGI ``--max-concurrent-requests``, llama.cpp ``--parallel``; an
unknown engine (no ``/metrics``: a gateway, a hosted endpoint) gets the concurrency number only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from analysis.inputs.server_metrics import metric_names


@dataclass(frozen=True)
class EngineCap:
    """How one engine names itself and its concurrency cap: one row per engine, so an engine
    the advice learns is spelt once (its metrics, its flag, its key) and never half-added."""

    metric_prefix: str  # how its Prometheus names start
    flag: str  # the server flag of its concurrency cap
    key: str  # the recommendation key of that cap (``section.name``)


#: engine → its metric prefix and concurrency cap
CAPS: dict[str, EngineCap] = {
    "vllm": EngineCap("vllm:", "--max-num-seqs", "vllm.max_num_seqs"),
    "sglang": EngineCap("sglang:", "--max-running-requests", "sglang.max_running_requests"),
    "tgi": EngineCap("tgi_", "--max-concurrent-requests", "tgi.max_concurrent_requests"),
    "llama.cpp": EngineCap("llamacpp:", "--parallel", "llamacpp.parallel"),
}

#: the run_info key the pipeline passes the detected engine under (None: looked, not found)
RUN_INFO_KEY = "server_engine"
#: the run_info key the pipeline passes the engine's KV pool in tokens under (None: not stated;
#: :func:`analysis.inputs.cache_config.kv_pool_tokens`)
KV_POOL_KEY = "server_kv_pool_tokens"


def detect_engine(server_metrics: pd.DataFrame | None, run_info: Mapping[str, Any]) -> str | None:
    """The engine's name (a key of :data:`CAPS`), or None when nothing says."""
    server = run_info.get("server")
    if isinstance(server, Mapping):
        named = str(server.get("engine") or "").lower().replace("llamacpp", "llama.cpp")
        if named in CAPS:
            return named
    counts = dict.fromkeys(CAPS, 0)
    for name in metric_names(server_metrics):
        for engine, cap in CAPS.items():
            if name.startswith(cap.metric_prefix):
                counts[engine] += 1
    best = max(counts, key=lambda e: counts[e])
    return best if counts[best] else None
