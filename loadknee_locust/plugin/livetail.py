"""Follow the run's telemetry CSVs as they grow: KV-cache %, waiting requests, GPU memory %.

Why read the files: the sampler already writes every sample there once a second, so the web UI
needs no second path into the sampler; each call reads only the bytes added since the last one
(stdlib ``csv``, a few rows a second), and keeps at most :data:`MAX_POINTS` per series.
"""

from __future__ import annotations

import csv
import io
from collections import deque
from pathlib import Path

from loadknee_locust.contract import GPU_CSV, SERVER_METRICS_CSV

MAX_POINTS = 2000
#: server metric names (vLLM, SGLang, TGI, llama.cpp) → series; KV usage is 0–1 in all of them
KV_METRICS = frozenset(
    {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"}
)
WAITING_METRICS = frozenset(
    {"vllm:num_requests_waiting", "sglang:num_queue_reqs", "tgi_queue_size",
     "llamacpp:requests_deferred"}
)  # fmt: skip


class _FileTail:
    """The complete lines added to one CSV since the last read, as dicts."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.header: list[str] | None = None

    def new_rows(self) -> list[dict[str, str]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        cut = data.rfind(b"\n") + 1  # a half-written last line waits for the next read
        self.offset += cut
        lines = data[:cut].decode("utf-8", "replace")
        if not lines:
            return []
        reader = csv.reader(io.StringIO(lines))
        rows = []
        for fields in reader:
            if self.header is None:
                self.header = fields
                continue
            rows.append(dict(zip(self.header, fields, strict=False)))
        return rows


def _num(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


class TelemetryTail:
    """Time series of one run directory: ``kv_pct``, ``waiting``, ``gpu_mem_pct`` as (t, v)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._server = _FileTail(run_dir / SERVER_METRICS_CSV)
        self._gpu = _FileTail(run_dir / GPU_CSV)
        self.series: dict[str, deque[tuple[float, float]]] = {
            name: deque(maxlen=MAX_POINTS) for name in ("kv_pct", "waiting", "gpu_mem_pct")
        }

    def update(self) -> None:
        for row in self._server.new_rows():
            t, v, metric = (
                _num(row.get("timestamp_unix_s")),
                _num(row.get("value")),
                row.get("metric"),
            )
            if t is None or v is None:
                continue
            if metric in KV_METRICS:
                self.series["kv_pct"].append((t, 100.0 * v))
            elif metric in WAITING_METRICS:
                self.series["waiting"].append((t, v))
        for row in self._gpu.new_rows():
            t = _num(row.get("timestamp_unix_s"))
            used, total = _num(row.get("memory_used_mib")), _num(row.get("memory_total_mib"))
            if t is not None and used is not None and total:
                self.series["gpu_mem_pct"].append((t, 100.0 * used / total))
