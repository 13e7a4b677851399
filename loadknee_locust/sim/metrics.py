"""``GET /metrics``: vLLM-named engine metrics and DCGM-named GPU telemetry (prometheus_client).

Each server gets its own :class:`CollectorRegistry` (never the global one). Gauges and counters are
read from the engine at scrape time by :class:`EngineCollector`; the latency histograms are
observed as sequences progress (:class:`LatencyHistograms` is the engine's observer). Exposed:

* ``vllm:num_requests_running``, ``vllm:num_requests_waiting`` (sequences),
  ``vllm:kv_cache_usage_perc`` (0–1), ``vllm:num_preemptions_total``,
  ``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total``,
  ``vllm:request_success_total{finished_reason}`` — all labelled ``model_name``;
* histograms ``vllm:time_to_first_token_seconds``, ``vllm:inter_token_latency_seconds``,
  ``vllm:e2e_request_latency_seconds``, ``vllm:request_queue_time_seconds``;
* ``vllm:prefix_cache_queries_total``, ``vllm:prefix_cache_hits_total`` (tokens, vLLM V1's
  names; with the cache off queries count and hits stay 0: :mod:`.prefixcache`);
* ``vllm:cache_config_info`` (value 1; the engine's memory settings as labels, like vLLM);
* ``DCGM_FI_DEV_FB_USED`` / ``DCGM_FI_DEV_FB_FREE`` (MiB), ``DCGM_FI_DEV_GPU_UTIL`` (0–100),
  ``DCGM_FI_PROF_SM_ACTIVE`` / ``DCGM_FI_PROF_DRAM_ACTIVE`` (0–1), ``DCGM_FI_DEV_MEM_COPY_UTIL``
  (0–100), ``DCGM_FI_DEV_POWER_USAGE`` (W: :func:`.telemetry.power_w`), labelled like the DCGM
  exporter (``gpu="0"``, ``UUID``, ``device``, ``modelName``,
  ``Hostname``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from loadknee_locust.sim.engine import Engine
from loadknee_locust.sim.telemetry import memory_used_mib, power_w

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                   2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0)  # fmt: skip
#: label of vllm:cache_config_info → SimParams field
CACHE_INFO = {
    "gpu_memory_utilization": "gpu_memory_utilization",
    "num_gpu_tokens": "kv_cache_tokens",
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_model_len": "max_model_len",
    "kv_prealloc": "kv_prealloc",
    "enable_prefix_caching": "enable_prefix_caching",
    "block_size": "block_size",
}
GPU_LABELS = ("gpu", "UUID", "device", "modelName", "Hostname")


class LatencyHistograms:
    """The engine's :class:`.engine.Observer`: vLLM's latency histograms."""

    def __init__(self, registry: CollectorRegistry, model: str) -> None:
        def histogram(name: str, doc: str) -> Histogram:
            h = Histogram(name, doc, ["model_name"], registry=registry, buckets=LATENCY_BUCKETS)
            return h

        self._queue = histogram("vllm:request_queue_time_seconds", "Time in the waiting queue.")
        self._ttft = histogram("vllm:time_to_first_token_seconds", "Time to first token.")
        self._e2e = histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency.")
        self._itl = histogram("vllm:inter_token_latency_seconds", "Time between output tokens.")
        self._model = model

    def queue_time(self, seconds: float) -> None:
        self._queue.labels(self._model).observe(seconds)

    def ttft(self, seconds: float) -> None:
        self._ttft.labels(self._model).observe(seconds)

    def itl(self, seconds: float) -> None:
        self._itl.labels(self._model).observe(seconds)

    def e2e(self, seconds: float, finish_reason: str) -> None:
        self._e2e.labels(self._model).observe(seconds)


class EngineCollector(Collector):
    """Reads gauges and counters from the engine at scrape time."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        e, p = self.engine, self.engine.params
        model = [p.model]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, doc, labels=["model_name"])
            family.add_metric(model, value)
            return family

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            family = CounterMetricFamily(name, doc, labels=["model_name"])
            family.add_metric(model, value)
            return family

        s = e.scheduler
        yield gauge("vllm:num_requests_running", "Sequences in the running batch.", s.in_batch)
        yield gauge("vllm:num_requests_waiting", "Sequences waiting.", len(s.waiting))
        yield gauge("vllm:kv_cache_usage_perc", "KV-cache usage (1 = full).", s.kv_usage)
        yield counter("vllm:num_preemptions", "Preemptions.", s.preemptions_total)
        yield counter("vllm:prompt_tokens", "Prefilled prompt tokens.", e.prompt_tokens_total)
        yield counter("vllm:generation_tokens", "Generated tokens.", e.generation_tokens_total)
        cache = prefix_cache_counts(e)
        yield counter(
            "vllm:prefix_cache_queries", "Prefix cache queries (tokens).", cache["queries"]
        )
        yield counter("vllm:prefix_cache_hits", "Prefix cache hits (tokens).", cache["hits"])
        success = CounterMetricFamily(
            "vllm:request_success", "Finished sequences.", labels=["finished_reason", "model_name"]
        )
        for reason in ("stop", "length"):
            success.add_metric([reason, p.model], e.finished_total[reason])
        yield success
        # vLLM states its KV pool in blocks: num_gpu_blocks × block_size tokens
        info = GaugeMetricFamily(
            "vllm:cache_config_info",
            "Engine memory settings.",
            labels=[*CACHE_INFO, "num_gpu_blocks"],
        )
        settings = [str(getattr(p, name)) for name in CACHE_INFO.values()]
        info.add_metric([*settings, str(p.kv_cache_tokens // p.block_size)], 1.0)
        yield info
        yield from self._gpu(e)

    def _gpu(self, e: Engine) -> Iterator[Metric]:
        p = e.params
        labels = ["0", "GPU-00000000-sim0-0000-0000-000000000000", "nvidia0", p.gpu_name, "sim"]
        used = memory_used_mib(p, e.scheduler.kv_used, up=e.up)
        util = e.busy.utilisation(time.monotonic())
        for name, doc, value in (
            ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (MiB).", used),
            ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (MiB).", p.gpu_total_mib - used),
            ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (%).", util.gpu_util_pct),
            ("DCGM_FI_PROF_SM_ACTIVE", "Ratio of cycles an SM is active.", util.sm_active),
            ("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles DRAM is active.", util.dram_active),
            ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (%).", util.mem_copy_util_pct),
            (
                "DCGM_FI_DEV_POWER_USAGE",
                "Power draw (W).",
                power_w(p, e.scheduler.in_batch, up=e.up),
            ),
        ):
            family = GaugeMetricFamily(name, doc, labels=list(GPU_LABELS))
            family.add_metric(labels, value)
            yield family


def prefix_cache_counts(engine: Engine) -> dict[str, int]:
    """The prefix cache's query and hit counters (tokens) and blocks held; zeros when it is off."""
    cache = engine.scheduler.prefix_cache
    if cache is None:  # a scheduler built with prefix_cache=None and no params (tests)
        return {"queries": 0, "hits": 0, "blocks": 0}
    return {"queries": cache.queries_tokens, "hits": cache.hits_tokens, "blocks": len(cache)}


def build_registry() -> CollectorRegistry:
    return CollectorRegistry(auto_describe=True)


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
