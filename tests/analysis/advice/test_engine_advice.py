"""Advice in the engine's own words (analysis/engine): detected from the metric names, each
engine's concurrency flag, the number only for an unknown engine, and never the server's current
limit printed as the fix."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.advice.engine import RUN_INFO_KEY, detect_engine
from analysis.advice.facts import OwnLimitFact, WithheldFact
from analysis.advice.recommend import recommend
from analysis.knee.find import find_knee
from analysis.stages.baseline import compute_baseline
from tests.support.knee_frames import sweep


def _metrics(*names: str) -> pd.DataFrame:
    return pd.DataFrame({"timestamp_unix_s": [0.0] * len(names), "metric": list(names)})


@pytest.mark.parametrize(
    ("names", "info", "engine"),
    [
        (("vllm:num_requests_running", "vllm:kv_cache_usage_perc"), {}, "vllm"),
        (("sglang:num_running_reqs",), {}, "sglang"),
        (("tgi_batch_current_size", "tgi_queue_size"), {}, "tgi"),
        (("llamacpp:requests_processing",), {}, "llama.cpp"),
        ((), {}, None),
        ((), {"server": {"engine": "llamacpp"}}, "llama.cpp"),
        (("DCGM_FI_DEV_GPU_UTIL",), {}, None),
    ],
)
def test_the_engine_comes_from_its_metric_names(names, info, engine):
    assert detect_engine(_metrics(*names), info) == engine


def _knee_table(kv: float | None):
    # 8 slots: 12 users queue 4 behind 8 running
    summary = sweep(
        [2, 4, 8, 12, 16], [190.0, 370.0, 700.0, 705.0, 706.0], [700.0, 720.0, 760.0, 1100.0,
        1500.0], baseline_tok_s=100.0, baseline_p95_ms=680.0,
        running_mean=[2.0, 4.0, 8.0, 8.0, 8.0], running_max=[2.0, 4.0, 8.0, 8.0, 8.0],
        waiting_mean=[0.0, 0.0, 0.0, 4.0, 8.0], kv_cache_peak_pct=[kv] * 5,
    )  # fmt: skip
    knee = find_knee(summary, compute_baseline(None, summary))
    assert (knee.knee_users, knee.max_concurrency, knee.server_slots) == (12, 8, 8)
    return summary, knee


@pytest.mark.parametrize(
    ("engine", "key", "flag"),
    [("vllm", "vllm.max_num_seqs", "--max-num-seqs"),
     ("sglang", "sglang.max_running_requests", "--max-running-requests"),
     ("tgi", "tgi.max_concurrent_requests", "--max-concurrent-requests"),
     ("llama.cpp", "llamacpp.parallel", "--parallel")],
)  # fmt: skip
def test_the_servers_own_limit_with_kv_room_says_raise_it_in_its_own_words(engine, key, flag):
    summary, knee = _knee_table(15.0)
    recs = recommend(summary, knee, compute_baseline(None, summary),
                     run_info={RUN_INFO_KEY: engine})  # fmt: skip
    item = next(i for i in recs.items if i.key == key)
    assert item.value == 45 and item.value != knee.server_slots  # 8 × 85 / 15
    # the fix is to raise its own flag to what the KV headroom predicts, not to set what it is
    assert item.reason == OwnLimitFact(flag, 8, 15.0, 45, 85.0)
    assert f"{flag} 45" in recs.server_flags


def test_a_full_kv_cache_keeps_the_cap_at_max_concurrency():
    summary, knee = _knee_table(90.0)
    recs = recommend(summary, knee, compute_baseline(None, summary),
                     run_info={RUN_INFO_KEY: "vllm"})  # fmt: skip
    assert recs.get("vllm.max_num_seqs") == 8


def test_an_unknown_engine_gets_the_number_only():
    summary, knee = _knee_table(None)
    recs = recommend(summary, knee, compute_baseline(None, summary),
                     run_info={RUN_INFO_KEY: None})  # fmt: skip
    assert not [i for i in recs.items if "." in i.key]
    assert recs.server_flags == ()
    assert recs.withheld == (WithheldFact("unknown_engine", slots=None, cap=8),)


def test_the_servers_own_value_from_props_is_never_printed_as_the_fix():
    """llama-server without /metrics: /props said --parallel 8 and the knee is that limit; with
    no KV figure the advice keeps it and says why, instead of "set --parallel 8"."""
    summary, knee = _knee_table(None)
    recs = recommend(summary, knee, compute_baseline(None, summary),
                     run_info={RUN_INFO_KEY: "llama.cpp", "server": {"slots": 8}})  # fmt: skip
    assert recs.get("llamacpp.parallel") is None and recs.server_flags == ()
    assert recs.withheld == (WithheldFact("already_at_cap", cap=8, flag="--parallel"),)
    other = recommend(summary, knee, compute_baseline(None, summary),
                      run_info={RUN_INFO_KEY: "llama.cpp", "server": {"slots": 16}})  # fmt: skip
    assert other.get("llamacpp.parallel") == 8  # a different current value: 8 is a change
