"""The simulator's prefix cache: block hashes, LRU, the scheduler's skipped prefill, /metrics."""

from __future__ import annotations

import asyncio

import pytest

from loadknee_locust.sim import metrics
from loadknee_locust.sim.batching import Scheduler, Sequence
from loadknee_locust.sim.params import SimParams
from loadknee_locust.sim.prefixcache import PrefixCache, block_hashes
from loadknee_locust.sim.protocol import parse_request
from loadknee_locust.sim.server import SimServer
from loadknee_locust.sim.tokenizer import chat_tokens, count_chat_tokens


def test_block_hashes_chain_the_prefix_and_drop_a_partial_block() -> None:
    a = block_hashes([str(i) for i in range(40)], 16)
    b = block_hashes([str(i) for i in range(32)] + ["x"] * 8, 16)
    c = block_hashes(["y"] + [str(i) for i in range(1, 40)], 16)
    assert len(a) == 2 and a == b  # 40 tokens: two full blocks; the partial third is not hashed
    assert c[0] != a[0] and c[1] != a[1]  # one token changed in block 0 changes every later hash


def test_lru_evicts_the_least_recently_used_block() -> None:
    cache = PrefixCache(capacity_blocks=2, block_size=4)
    cache.insert([1, 2])
    assert cache.match([1]) == 1  # touches block 1: block 2 is now the oldest
    cache.insert([3])
    assert cache.match([2]) == 0 and cache.match([1, 3]) == 2 and cache.evictions == 1


def test_chat_tokens_count_as_the_server_counts() -> None:
    messages = [{"role": "system", "content": "a b, c"}, {"role": "user", "content": "d e"}]
    tokens = chat_tokens(messages, per_message=3, constant=3)
    assert len(tokens) == count_chat_tokens(messages, per_message=3, constant=3) == 15


def _seq(seq_id: int, prompt: list[str], params: SimParams) -> Sequence:
    blocks = block_hashes(prompt, params.block_size) if params.enable_prefix_caching else ()
    return Sequence(seq_id, len(prompt), 2, "length", block_hashes=blocks)


def _run(scheduler: Scheduler, seqs: list[Sequence]) -> list[int]:
    """Serve ``seqs`` one after the other; the prefill tokens of each one's admitting step."""
    prefills = []
    for seq in seqs:
        scheduler.add([seq])
        result = scheduler.step()
        assert result is not None
        prefills.append(result.prefill_tokens)
        while scheduler.has_work:
            scheduler.step()
    return prefills


@pytest.mark.parametrize("on", [True, False])
def test_a_shared_prefix_skips_prefill_only_with_the_cache_on(on: bool) -> None:
    params = SimParams(enable_prefix_caching=on, block_size=16)
    shared = [f"s{i}" for i in range(100)]  # 6 full blocks = 96 tokens
    seqs = [_seq(i, [*shared, f"u{i}", *"abcdefghij"], params) for i in range(3)]
    scheduler = Scheduler(params)
    prefills = _run(scheduler, seqs)
    cache = scheduler.prefix_cache
    if on:
        assert prefills == [111, 111 - 96, 111 - 96]
        assert cache is not None and (cache.queries_tokens, cache.hits_tokens) == (333, 192)
        assert [s.cached_tokens for s in seqs] == [0, 96, 96]
    else:  # queried, never found: a measured 0 %
        assert prefills == [111, 111, 111]
        assert cache is not None and (cache.queries_tokens, cache.hits_tokens) == (333, 0)


def test_a_full_hit_still_computes_one_token() -> None:
    params = SimParams(enable_prefix_caching=True, block_size=4)
    prompt = [f"t{i}" for i in range(8)]
    scheduler = Scheduler(params)
    assert _run(scheduler, [_seq(0, prompt, params), _seq(1, prompt, params)]) == [8, 1]


def test_parse_request_hashes_blocks_only_with_the_cache_on() -> None:
    body = {"model": "sim-llm", "messages": [{"role": "user", "content": "w " * 40}]}
    off = parse_request("chat", body, SimParams())
    on = parse_request("chat", body, SimParams(enable_prefix_caching=True))
    assert off.spec.prompt_blocks == ()
    assert len(on.spec.prompt_blocks[0]) == (3 + 40 + 3) // 16


@pytest.mark.parametrize("on", [True, False])
def test_metrics_export_the_counters_under_vllm_names(on: bool) -> None:
    async def scrape() -> str:
        server = SimServer(SimParams(enable_prefix_caching=on))
        cache = server.engine.scheduler.prefix_cache
        assert cache is not None
        cache.count(100, 64 if on else 0)
        return metrics.render(server.registry).decode()

    text = asyncio.run(scrape())
    assert 'vllm:prefix_cache_queries_total{model_name="sim-llm"} 100.0' in text
    assert 'vllm:prefix_cache_hits_total{model_name="sim-llm"} ' + ("64.0" if on else "0.0") in text
    assert f'enable_prefix_caching="{on}"' in text


@pytest.mark.parametrize("on", [True, False])
def test_shared_prefix_blocks_count_once_in_the_kv_budget(on: bool) -> None:
    # 96 shared tokens (6 blocks) + 32 own per prompt, 16 out; a 1024-token budget with
    # reservation: 1024 // 144 = 7 fit without sharing, (1024 - 96) // (144 - 96) = 19 with it
    params = SimParams(
        enable_prefix_caching=on, block_size=16, kv_cache_tokens=1024, max_model_len=512,
        kv_reserve_max_tokens=True, max_num_seqs=64,
    )  # fmt: skip
    from loadknee_locust.sim.saturation import kv_limit

    shared = [f"s{i}" for i in range(96)]
    scheduler = Scheduler(params)
    warm = _seq(0, [*shared, *(f"w{j}" for j in range(32))], params)
    warm.stop_at, warm.reserve = 16, 144
    _run(scheduler, [warm])  # the system prompt is now cached
    seqs = []
    for i in range(1, 31):
        seq = _seq(i, [*shared, *(f"u{i}-{j}" for j in range(32))], params)
        seq.stop_at, seq.reserve = 16, 128 + 16
        seqs.append(seq)
    scheduler.add(seqs)
    peak_running, peak_kv = 0, 0
    while scheduler.has_work:
        result = scheduler.step()
        assert result is not None
        peak_running = max(peak_running, len(scheduler.running))
        peak_kv = max(peak_kv, result.peak_kv_tokens)
        assert scheduler.reserved <= params.kv_cache_tokens
        assert scheduler.kv_used == sum(
            s.kv_tokens - 16 * len(s.held_blocks) for s in scheduler.running
        ) + 16 * len(scheduler.shared_refs)
    expected = kv_limit(params, 128, 16, cached_tokens=96 if on else 0)
    assert expected == (19 if on else 7)
    assert peak_running == expected
    assert scheduler.kv_used == 0 and not scheduler.shared_refs  # every block given back
    if on:  # 19 sequences in flight hold the 96 shared tokens once: below 19 × 128
        assert peak_kv < 19 * 128
