"""The engine's stated KV pool, read from ``vllm:cache_config_info`` labels as scraped."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.inputs.cache_config import kv_pool_tokens, prefix_caching_label

A, B = "http://10.0.0.1:8000/metrics", "http://10.0.0.2:8000/metrics"


def _frame(*rows: tuple[str, str, str]) -> pd.DataFrame:
    # an info metric's value is 1; SGLang's pool gauge carries the pool itself
    return pd.DataFrame(
        [dict(timestamp_unix_s=float(i), endpoint=endpoint, metric=metric, labels=labels,
              value=161721.0 if metric.startswith("sglang:") else 1.0, error="")
         for i, (endpoint, metric, labels) in enumerate(rows)]
    )  # fmt: skip


INFO = "vllm:cache_config_info"
SG = "sglang:max_total_num_tokens"


@pytest.mark.parametrize(
    ("rows", "pool", "prefix"),
    [
        # vLLM: blocks × block size
        ([(A, INFO, 'block_size="16",enable_prefix_caching="True",num_gpu_blocks="2048"')],
         32768, "true"),
        # the simulator's own label before it exported blocks
        ([(A, INFO, 'block_size="16",num_gpu_tokens="16384"')], 16384, None),
        # before the engine profiled its memory vLLM says None: no pool
        ([(A, INFO, 'block_size="16",num_gpu_blocks="None"')], None, None),
        # the last readable sample wins (a restart with another pool)
        ([(A, INFO, 'block_size="16",num_gpu_blocks="100"'),
          (A, INFO, 'block_size="16",num_gpu_blocks="200"')], 3200, None),
        # two replicas: their pools add up, like their running requests
        ([(A, INFO, 'block_size="16",num_gpu_blocks="100"'),
          (B, INFO, 'block_size="32",num_gpu_blocks="100"')], 4800, None),
        # one replica silent about its pool: no total
        ([(A, INFO, 'block_size="16",num_gpu_blocks="100"'), (B, INFO, 'block_size="16"')],
         None, None),
        # no pool stated at all (TGI, llama.cpp)
        ([(A, "vllm:num_requests_running", 'model_name="m"')], None, None),
        # SGLang's gauge, each tensor-parallel rank reporting the same pool
        ([(A, SG, 'model_name="m",tp_rank="0"'), (A, SG, 'model_name="m",tp_rank="1"')],
         161721, None),
        # two SGLang replicas
        ([(A, SG, 'model_name="m"'), (B, SG, 'model_name="m"')], 323442, None),
    ],
)  # fmt: skip
def test_the_pool_and_prefix_setting_as_the_engine_states_them(rows, pool, prefix) -> None:
    frame = _frame(*rows)
    assert kv_pool_tokens(frame) == pool
    assert prefix_caching_label(frame) == prefix


def test_no_server_metrics_no_pool() -> None:
    assert kv_pool_tokens(pd.DataFrame()) is None
