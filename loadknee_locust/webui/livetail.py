"""Follow the run's telemetry CSVs as they grow: KV-cache %, waiting requests, GPU memory %,
and the prefix-cache hit rate between consecutive scrapes (from the servers' token counters).

Why read the files: the sampler already writes every sample there once a second, so the web UI
needs no second path into the sampler; each call reads only the bytes added since the last one
(stdlib ``csv``, a few rows a second), and keeps at most :data:`MAX_POINTS` per series.
"""

from __future__ import annotations

import csv
import io
from collections import deque
from pathlib import Path

from loadknee_core.contract import GPU_CSV, SERVER_METRICS_CSV

MAX_POINTS = 2000
#: server metric names (vLLM, SGLang, TGI, llama.cpp) → series; KV usage is 0–1 in all of them
KV_METRICS = frozenset(
    {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"}
)
WAITING_METRICS = frozenset(
    {"vllm:num_requests_waiting", "sglang:num_queue_reqs", "tgi_queue_size",
     "llamacpp:requests_deferred"}
)  # fmt: skip
#: prefix-cache counters (tokens) → which one; the hit rate between two scrapes is plotted
CACHE_COUNTERS = {
    "vllm:prefix_cache_queries_total": 0, "vllm:prefix_cache_hits_total": 1,
    "vllm:gpu_prefix_cache_queries_total": 0, "vllm:gpu_prefix_cache_hits_total": 1,
    "sglang:prompt_tokens_total": 0, "sglang:cached_tokens_total": 1,
}  # fmt: skip


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
            name: deque(maxlen=MAX_POINTS)
            for name in ("kv_pct", "waiting", "gpu_mem_pct", "cache_hit_pct")
        }
        #: per scrape time: [queries, hits] summed over label sets, until both are in
        self._cache_at: dict[float, list[float | None]] = {}
        self._cache_last: tuple[float, float] | None = None  # (queries, hits) at the last scrape

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
            elif metric in CACHE_COUNTERS:
                pair = self._cache_at.setdefault(t, [None, None])
                i = CACHE_COUNTERS[metric]
                pair[i] = (pair[i] or 0.0) + v
        self._cache_points()
        for row in self._gpu.new_rows():
            t = _num(row.get("timestamp_unix_s"))
            used, total = _num(row.get("memory_used_mib")), _num(row.get("memory_total_mib"))
            if t is not None and used is not None and total:
                self.series["gpu_mem_pct"].append((t, 100.0 * used / total))

    def _cache_points(self) -> None:
        """Hit % between each finished scrape and the one before (a scrape is finished once a
        later one has started: its label sets are all in)."""
        times = sorted(self._cache_at)
        for t in times[:-1]:
            queries, hits = self._cache_at.pop(t)
            if queries is None or hits is None:
                continue
            last, self._cache_last = self._cache_last, (queries, hits)
            if last is not None and queries > last[0] and hits >= last[1]:
                pct = 100.0 * (hits - last[1]) / (queries - last[0])
                self.series["cache_hit_pct"].append((t, pct))
