"""A 100k-record prompt log with 1 % malformed lines replays with flat memory and reports them."""

from __future__ import annotations

import gc
import json
import random
import tracemalloc
from pathlib import Path

import psutil
import pytest

from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.prompts import SourceOptions, build_source
from loadknee_locust.prompts.replay import LogReplaySource

RECORDS = 100_000
REPLAYS = 5_000
BAD_EVERY = 100  # 1 %


def source_options(**options: object) -> SourceOptions:
    """The prompt options of these ``--llm-*`` values (the rest at their defaults)."""
    return SourceOptions.from_options(LlmOptions(**options))  # type: ignore[arg-type]


def _write_log(path: Path) -> list[int]:
    """~38 MB of chat bodies; every 100th line broken in one of three ways. Returns bad lines."""
    rng = random.Random(5)
    words = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota")
    texts = [" ".join(rng.choice(words) for _ in range(60)) for _ in range(64)]
    broken = ('{"messages": [', '{"prompt": ""}', "[1, 2]")
    bad = []
    lines = []
    for i in range(1, RECORDS + 1):
        if i % BAD_EVERY == 0:
            bad.append(i)
            lines.append(broken[i % 3])
            continue
        message = {"role": "user", "content": f"{i} {texts[i % 64]}"}
        lines.append(json.dumps({"messages": [message], "max_tokens": 8 + i % 57}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return bad


@pytest.mark.slow
def test_100k_line_log_replays_with_flat_memory(tmp_path: Path) -> None:
    log = tmp_path / "big.jsonl"
    bad = _write_log(log)
    size_mib = log.stat().st_size / 2**20
    gc.collect()
    rss0 = psutil.Process().memory_info().rss

    tracemalloc.start()
    source = build_source(source_options(prompt_log=str(log), seed=1))
    assert isinstance(source, LogReplaySource)
    _, index_peak = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    before, _ = tracemalloc.get_traced_memory()
    for _ in range(REPLAYS):
        source.next_prompt("chat")
    after, replay_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_growth_mib = (psutil.Process().memory_info().rss - rss0) / 2**20

    info = source.info()
    source.close()
    print(
        f"\nlog {size_mib:.1f} MiB; index peak {index_peak / 2**20:.2f} MiB; "
        f"{REPLAYS} replays: peak {(replay_peak - before) / 2**20:.2f} MiB, "
        f"retained {(after - before) / 2**10:.1f} KiB; RSS growth {rss_growth_mib:.1f} MiB"
    )
    assert size_mib > 30
    # the index holds 8 bytes per valid record; nothing proportional to the prompt text
    assert index_peak < 4 * 2**20
    assert replay_peak - before < 1 * 2**20 and after - before < 256 * 2**10
    assert rss_growth_mib < 0.5 * size_mib
    assert info["records"] == RECORDS
    assert info["valid_records"] == RECORDS - len(bad)
    assert info["bad_records"] == len(bad) == RECORDS // BAD_EVERY
    assert [b["line"] for b in info["bad_lines"]] == bad[: len(info["bad_lines"])]
    assert "alpha" not in json.dumps(info)
