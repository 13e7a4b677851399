"""Which engine served the run, and its spelling of the concurrency limit.

Detected from the server's metric names in ``server_metrics.csv`` (``vllm:``, ``sglang:``,
``tgi_``, ``llamacpp:``), or ``run.json``'s ``server.engine`` when the load side recorded one.
Every engine names its concurrency cap its own way: vLLM ``--max-num-seqs``, SGLang
``--max-running-requests``, TGI ``--max-concurrent-requests``, llama.cpp ``--parallel``; an
unknown engine (no ``/metrics``: a gateway, a hosted endpoint) gets the concurrency number only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

#: engine → its concurrency-cap flag
CAP_FLAGS: dict[str, str] = {
    "vllm": "--max-num-seqs",
    "sglang": "--max-running-requests",
    "tgi": "--max-concurrent-requests",
    "llama.cpp": "--parallel",
}
#: engine → the recommendation key of its cap (``section.name``)
CAP_KEYS: dict[str, str] = {
    "vllm": "vllm.max_num_seqs",
    "sglang": "sglang.max_running_requests",
    "tgi": "tgi.max_concurrent_requests",
    "llama.cpp": "llamacpp.parallel",
}
#: metric-name prefix → engine
PREFIXES: tuple[tuple[str, str], ...] = (
    ("vllm:", "vllm"),
    ("sglang:", "sglang"),
    ("tgi_", "tgi"),
    ("llamacpp:", "llama.cpp"),
)
#: the run_info key the pipeline passes the detected engine under (None: looked, not found)
RUN_INFO_KEY = "server_engine"
#: the run_info key the pipeline passes the engine's KV pool in tokens under (None: not stated;
#: :func:`analysis.inputs.cache_config.kv_pool_tokens`)
KV_POOL_KEY = "server_kv_pool_tokens"


def detect_engine(server_metrics: pd.DataFrame | None, run_info: Mapping[str, Any]) -> str | None:
    """The engine's name (a key of :data:`CAP_FLAGS`), or None when nothing says."""
    server = run_info.get("server")
    if isinstance(server, Mapping):
        named = str(server.get("engine") or "").lower().replace("llamacpp", "llama.cpp")
        if named in CAP_FLAGS:
            return named
    if server_metrics is None or server_metrics.empty or "metric" not in server_metrics:
        return None
    names = server_metrics["metric"].dropna().astype(str).unique()
    counts = {engine: 0 for _, engine in PREFIXES}
    for name in names:
        for prefix, engine in PREFIXES:
            if name.startswith(prefix):
                counts[engine] += 1
    best = max(counts, key=lambda e: counts[e])
    return best if counts[best] else None
