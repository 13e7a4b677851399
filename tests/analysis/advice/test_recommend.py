"""recommend / to_yaml: every setting with its reason, from typed-in record tables."""

from __future__ import annotations

import argparse
import re
from dataclasses import replace

import pytest

from analysis.advice import facts
from analysis.advice.facts import CapFact, ModelLenFact, RequestTimeoutFact, WithheldFact
from analysis.advice.recommend import RecommendParams, recommend, scoped_to_the_answer
from analysis.diagnosis.bottleneck import diagnose
from analysis.knee.find import find_knee
from analysis.report.advice_words import withheld_text
from analysis.report.advice_yaml import to_yaml
from analysis.stages.baseline import compute_baseline
from tests.support.knee_frames import seed_002_summary, sweep

LEVELS = [2, 4, 8, 16]


def _recs(summary, *, run_info=None, **params):
    baseline = compute_baseline(None, summary)
    knee = diagnose(summary, find_knee(summary, baseline), baseline)
    return recommend(summary, knee, baseline, run_info=run_info, params=RecommendParams(**params))


def _knee_sweep(**columns):
    return sweep(LEVELS, [200, 400, 800, 820], [100, 100, 110, 300], baseline_tok_s=100.0,
                 baseline_p95_ms=100.0, **columns)  # fmt: skip


@pytest.mark.parametrize(("base", "watermark"), [(24, [16, 19]), (8, [5, 6]), (1, [1, 1])])
def test_production_watermark_is_70_to_80_percent(base, watermark):
    summary = sweep([base], [100.0 * base], [100], baseline_tok_s=100.0, baseline_p95_ms=100.0)
    recs = _recs(summary)
    assert recs.get("base_capacity") == base
    assert recs.get("production_watermark") == watermark
    assert recs.get("interactive_max_concurrency") == watermark[1]


def test_seed_002_settings():
    recs = _recs(seed_002_summary())
    assert recs.get("max_concurrency") == 24
    assert recs.get("offline_batch_max_concurrency") == 24  # the knee stage had failures
    assert recs.get("vllm.max_num_seqs") == 24
    assert recs.get("vllm.gpu_memory_utilization") == 0.85  # memory led: 0.90 → 0.85
    assert "--max-num-seqs 24" in recs.server_flags
    assert "--gpu-memory-utilization 0.85" in recs.server_flags


def test_offline_batch_may_run_at_a_clean_knee():
    recs = _recs(_knee_sweep())
    assert recs.get("max_concurrency") == 8
    assert recs.get("offline_batch_max_concurrency") == 16
    assert recs.get("vllm.gpu_memory_utilization") is None  # memory did not lead


def test_queue_timeout_from_baseline_p95_times_margin():
    summary = _knee_sweep()
    assert _recs(summary).get("queue_timeout_ms") == 1000  # 100 ms × 3, rounded up to 1 s
    assert _recs(summary, queue_timeout_margin=25).get("queue_timeout_ms") == 3000


def test_request_timeout_covers_the_longest_output_at_the_knee():
    summary = _knee_sweep(tpot_p95_ms=[10, 10, 12, 40], ttft_p95_ms=[50, 50, 60, 500],
                          completion_tokens_max=[256, 256, 256, 1024])  # fmt: skip
    rec = next(i for i in _recs(summary).items if i.key == "request_timeout_ms")
    expected_ms = (500 + 1024 * 40) * 1.5
    assert rec.value == pytest.approx(expected_ms, abs=1000) and rec.value >= expected_ms
    fact = rec.reason
    assert isinstance(fact, RequestTimeoutFact) and fact.method == "tpot"
    assert (fact.users, fact.tokens, fact.ttft_p95_ms, fact.tpot_p95_ms) == (16, 1024, 500, 40)
    assert (fact.output_ms, fact.margin) == (500 + 1024 * 40, 1.5)


def test_max_num_seqs_counts_prompts_per_request():
    summary = _knee_sweep(batch_size=[4, 4, 4, 4])
    recs = _recs(summary)
    assert recs.get("vllm.max_num_seqs") == 32  # 8 users × 4 prompts


def test_max_model_len_only_from_a_replayed_log_large_enough():
    summary = _knee_sweep(prompt_tokens_max=[3000, 3000, 3000, 3000],
                          completion_tokens_max=[500, 500, 500, 500])  # fmt: skip
    assert _recs(summary, run_info={"prompt_source": {"kind": "fixed"}}).get(
        "vllm.max_model_len") is None  # fmt: skip
    log = {"prompt_source": {"kind": "log", "valid_records": 5000}}
    # 3,500 tokens × 1.25 headroom = 4,375 → 8192
    rec = next(i for i in _recs(summary, run_info=log).items if i.key == "vllm.max_model_len")
    assert rec.value == 8192
    assert rec.reason == ModelLenFact(3500, 5000, 1.25)
    told = {"prompt_source": {"kind": "log", "max_context_tokens": 40000, "records": 2000}}
    assert _recs(summary, run_info=told).get("vllm.max_model_len") == 65536


def test_no_max_model_len_from_a_20_line_log():
    """A 20-line log whose longest context is 950 tokens would give --max-model-len 1024:
    longer production requests would get HTTP 400. Withheld, with the rule."""
    summary = _knee_sweep(prompt_tokens_max=[700] * 4, completion_tokens_max=[250] * 4)
    log = {"prompt_source": {"kind": "log", "records": 20, "valid_records": 20}}
    recs = _recs(summary, run_info=log)
    assert recs.get("vllm.max_model_len") is None
    assert not any("max-model-len" in flag for flag in recs.server_flags)
    (note,) = [n for n in recs.withheld if isinstance(n, WithheldFact) and n.kind == "small_log"]
    assert (note.records, note.min_records, note.longest_tokens) == (20, 1000, 950)
    assert note.rule == "max_model_len"
    assert withheld_text(note) in " ".join(to_yaml(recs).replace("# ", "").split())


@pytest.mark.parametrize(
    ("target", "efficiency", "replicas"), [(100, None, 4), (100, 0.65, 7), (10, None, 1)]
)
def test_replicas_for_a_target_concurrency(target, efficiency, replicas):
    summary = sweep([32], [3200.0], [100], baseline_tok_s=100.0, baseline_p95_ms=100.0)
    recs = _recs(summary, target_concurrency=target, replica_efficiency=efficiency)
    # 32 users → 25 per replica at the 80 % watermark; 100 / (25 × 0.65) = 6.15 → 7
    assert recs.get("replicas") == replicas


def test_gpu_memory_utilization_lowered_from_the_known_value():
    recs = _recs(seed_002_summary(), gpu_memory_utilization=0.85)
    assert recs.get("vllm.gpu_memory_utilization") == 0.8  # one step down: 0.85 → 0.80


def test_every_item_has_a_reason_and_yaml_holds_every_key():
    recs = _recs(seed_002_summary(), target_concurrency=60)
    text = to_yaml(recs)
    assert all(item.reason for item in recs.items)
    pairs = dict(re.findall(r"^  (\w+): (.+)$", text, flags=re.M))
    for item in recs.items:
        key = item.key.rpartition(".")[2]
        assert key in pairs, key
    assert pairs["production_watermark"] == "[16, 19]"
    assert pairs["gpu_memory_utilization"] == "0.85"
    assert text.index("server:") < text.index("vllm:")
    assert all(len(line) <= 100 for line in text.splitlines() if line.startswith("  #"))


def test_params_cli_round_trip():
    parser = argparse.ArgumentParser()
    RecommendParams.add_cli_args(parser)
    ns = parser.parse_args(["--target-concurrency", "100", "--replica-efficiency", "0.65"])
    assert RecommendParams.from_cli_args(ns) == RecommendParams(
        target_concurrency=100, replica_efficiency=0.65
    )


def test_request_timeout_without_streaming_scales_the_median_rate_to_p99():
    summary = _knee_sweep(
        s_per_1k_completion_tokens=[5, 5, 6, 20],
        e2e_p50_ms=[90, 90, 100, 200],
        e2e_p99_ms=[110, 110, 120, 400],
        completion_tokens_max=[100] * 4,
    )
    rec = next(i for i in _recs(summary).items if i.key == "request_timeout_ms")
    assert rec.value == 6000  # 100 tokens × 20 ms × (400 / 200) × 1.5, rounded up to 1 s
    fact = rec.reason
    assert isinstance(fact, RequestTimeoutFact) and fact.method == "per_token"
    assert (fact.tokens, fact.ms_per_token, fact.tail_ratio) == (100, 20, 2.0)


def test_no_max_num_seqs_without_a_knee():
    """A sweep that never saturated would print --max-num-seqs 16: pasted into vLLM it
    caps a server below what it can do. No flag; the advice is to sweep higher, with levels."""
    summary = sweep(LEVELS, [200, 400, 800, 1600], [100] * 4, baseline_tok_s=100.0,
                    baseline_p95_ms=100.0)  # fmt: skip
    recs = _recs(summary, run_info={"target_url": "http://127.0.0.1:8000"})
    assert recs.get("vllm.max_num_seqs") is None
    assert not any("max-num-seqs" in flag for flag in recs.server_flags)
    assert recs.withheld == (
        WithheldFact(
            "not_saturated", top_users=16, host="http://127.0.0.1:8000", levels=(16, 32, 48, 64)
        ),
    )
    knee_rec = next(i for i in _recs(_knee_sweep()).items if i.key == "vllm.max_num_seqs")
    assert knee_rec.value == 8 and knee_rec.reason == CapFact(8, "knee", 16, 1)


_OWN = facts.OwnLimitFact("--max-num-seqs", 40, 43.6, 72, 85.0)
_SOFT = facts.DeployFact("configure", users=16, at_users=40, bounds=("knee",), departed_users=24,
                         batch_users=38)  # fmt: skip
_HARD = facts.DeployFact("configure", users=38, at_users=40, bounds=("knee",))


@pytest.mark.parametrize(
    ("answer", "scope"),
    [
        (facts.DeployAnswer(16, "knee", _SOFT), (16, 38)),  # the tail set 16; the slots move 38
        (facts.DeployAnswer(38, "knee", _HARD), (None, None)),  # the knee's own figure
        (facts.DeployAnswer(8, "knee", "read back from knee.json"), (None, None)),
    ],
    ids=["soft knee", "hard knee", "words read back"],
)
def test_a_raise_the_slots_fact_says_which_figure_it_moves(answer, scope) -> None:
    own = facts.Recommendation("vllm.max_num_seqs", 72, _OWN)
    other = facts.Recommendation("max_concurrency", 38, "a reason")
    scoped = scoped_to_the_answer([own, other], answer)
    assert scoped[1] is other  # only the raise-the-slots fact is told
    fact = scoped[0].reason
    assert isinstance(fact, facts.OwnLimitFact)
    assert (fact.interactive_users, fact.offline_users) == scope
    assert replace(fact, interactive_users=None, offline_users=None) == _OWN
