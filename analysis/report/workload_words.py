"""The record's lines on the workload: where the prefix-cache hit rate comes from, the TTFT of
hits against misses, and the conversations by turn.

The figures are measured in :mod:`analysis.stages.prefix_cache` and
:mod:`analysis.stages.conversations` (tables, no words); record.md and knee.json take their words
from here.
"""

from __future__ import annotations

import pandas as pd

from analysis.stages.conversations import by_turn, conversation_counts
from analysis.stages.prefix_cache import counters_found, hit_miss_ttft
from loadknee_core.numeric import num


def source_note(server_metrics: pd.DataFrame) -> str:
    """One line for the report: which counters the hit rate is from, or that there are none."""
    pair = counters_found(server_metrics)
    if pair is None:
        return (
            "prefix-cache hit rate: the server exposes no prefix-cache counters "
            "(vLLM's vllm:prefix_cache_queries/hits, SGLang's cached_tokens); not measured"
        )
    return f"prefix-cache hit rate: from {pair.hits} / {pair.queries} ({pair.server})"


def report_note(server_metrics: pd.DataFrame, run_info: dict[str, object]) -> str | None:
    """The report's prefix-cache line: where the hit rate comes from, or that the server exposes
    no counters when the run sent a shared prefix; None when neither applies."""
    source = run_info.get("prompt_source")
    shared = source.get("shared_prefix_tokens") if isinstance(source, dict) else None
    if counters_found(server_metrics) is None and not shared:
        return None
    return source_note(server_metrics)


def hit_miss_line(requests: pd.DataFrame, users: dict[int, object]) -> str | None:
    """``record.md``'s line on hits' and misses' TTFT (``users``: stage → its users)."""
    table = hit_miss_ttft(requests)
    if table.empty:
        return None

    def ms(value: object) -> str:
        x = num(value)
        return "—" if x is None else f"{x:.1f} ms"

    parts = [
        f"{users.get(int(float(str(r['stage']))), r['stage'])} users: {r['hits']} hits "
        f"{ms(r['hit_ttft_p50_ms'])}, {r['misses']} misses {ms(r['miss_ttft_p50_ms'])}"
        for r in table.to_dict("records")
    ]
    return "TTFT P50 of prefix-cache hits vs misses (the server's cached_tokens): " + "; ".join(
        parts
    )


def turn_lines(requests: pd.DataFrame, turns: int | None) -> list[str]:
    """The report's lines: the conversations and a small table by turn; [] without any."""
    table = by_turn(requests)
    if table.empty:
        return []
    counts = conversation_counts(requests, turns)
    if turns and turns > 1:
        head = (
            f"conversations: {counts['conversations']} ({counts['completed']} with all {turns} "
            f"turns answered, {counts['cut']} cut by a failure, a stage change or the run's end)"
        )
    else:  # replayed conversations: each has its own number of turns
        head = f"conversations: {counts['conversations']} (replayed, each with its own turns)"
    lines = [
        head + "; by turn (served, measured rows):",
        "| turn | requests | prompt tokens | TTFT P50 ms | TTFT P95 ms | e2e P50 ms | e2e P95 ms |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in table.itertuples(index=False):
        lines.append(
            f"| {row.turn} | {row.requests} | {row.prompt_tokens_mean:.0f} | "
            f"{row.ttft_p50_ms:.1f} | {row.ttft_p95_ms:.1f} | {row.e2e_p50_ms:.1f} | "
            f"{row.e2e_p95_ms:.1f} |"
        )
    return lines
