"""A flag to try rests on the engine's stated KV pool, so two runs of one server say the same
value (issue 39, item 2): the demo's shape (8 slots bind, KV lightly used) analysed with and
without ``vllm:cache_config_info`` in server_metrics.csv, at two KV peaks as two runs sample
them."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from analysis.advice.facts import OwnLimitFact
from analysis.pipeline import analyze_run
from loadknee_core import contract
from tests.support.report_fixtures import OUTPUT_TOKENS, PROMPT_TOKENS, write_run_dir

POOL_BLOCKS, BLOCK = 1024, 16  # 16,384 tokens, the simulator's default pool


def _add_cache_config(run: Path, blocks: int | None) -> None:
    """Append the engine's cache settings to every scrape, as vLLM exports them."""
    path = run / contract.SERVER_METRICS_CSV
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    stamps = sorted({row["timestamp_unix_s"] for row in rows}, key=float)
    labels = f'block_size="{BLOCK}",enable_prefix_caching="False",num_gpu_blocks="{blocks}"'
    extra = [dict(timestamp_unix_s=ts, endpoint=rows[0]["endpoint"],
                  metric="vllm:cache_config_info", labels=labels, value="1.0", error="")
             for ts in stamps]  # fmt: skip
    with path.open("a", newline="") as f:
        csv.DictWriter(f, fieldnames=list(rows[0])).writerows(extra)


def _own_limit(tmp_path: Path, name: str, kv_full_pct: float, blocks: int | None) -> OwnLimitFact:
    run = write_run_dir(
        tmp_path / name, levels=(1, 2, 4, 8, 12, 16), slots=8, kv_full_pct=kv_full_pct
    )
    if blocks is not None:
        _add_cache_config(run, blocks)
    recs = analyze_run(run).recommendations
    item = next(i for i in recs.items if i.key == "vllm.max_num_seqs")
    assert isinstance(item.reason, OwnLimitFact), item
    assert item.value == item.reason.predicted
    return item.reason


@pytest.mark.parametrize(
    ("blocks", "expected"),
    [
        # 16,384 tokens × 0.85 / (128 + 32) tokens: the same for both runs
        (POOL_BLOCKS, (87, 87)),
        # no pool stated: 8 slots × 85 % / the gauge's peak, which the two runs sample apart
        (None, (45, 68)),
        # a pool too small for more than the slots at the longest request: the gauge's word
        (80, (45, 68)),
    ],
)
def test_two_runs_of_one_server_try_the_same_value_where_the_pool_is_stated(
    tmp_path, blocks, expected
) -> None:
    full = _own_limit(tmp_path, "full", 15.0, blocks)
    short = _own_limit(tmp_path, "short", 10.0, blocks)  # a short run's peak missed the fullest
    assert (full.predicted, short.predicted) == expected
    stated = blocks is not None and expected[0] == expected[1]
    pool = POOL_BLOCKS * BLOCK if stated else None
    for fact in (full, short):
        assert fact.pool_tokens == pool
        assert fact.request_tokens == (PROMPT_TOKENS + OUTPUT_TOKENS if stated else None)
