"""Which comparison two or more runs make, read from their run.json (and the RunSide value).

``detect_kind`` looks, in order, for: one run replaying a prompt log and one with fixed lengths
(``benchmark-vs-replay``), different replica counts (``replicas``; from ``--replicas`` or a
``replicas`` key), different batch sizes (``batch``; stages.csv, else ``llm_batch_size``),
different prefix caching / shared-prefix settings (``prefix-cache``); otherwise ``config``
(before vs after). Keys are found by dotted suffix (:func:`lookup`), so the lookup survives the
run.json layout moving a key into a sub-object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from analysis.inputs.cache_config import prefix_caching_label
from analysis.inputs.load import Run
from analysis.model import KneeResult
from analysis.stages.levels import level_rows

KINDS: tuple[str, ...] = (
    "auto",
    "benchmark-vs-replay",
    "config",
    "replicas",
    "batch",
    "prefix-cache",
)


@dataclass(frozen=True)
class RunSide:
    """One run as the comparison sees it."""

    label: str
    summary: pd.DataFrame
    knee: KneeResult
    run_info: Mapping[str, Any]
    replicas: int | None = None
    run: Run | None = None  # the run's rows, for the intervals some comparisons compute


def flatten(info: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested run.json → {"a.b.c": value}, keys lower-case, so lookups survive reshuffles."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        name = f"{prefix}{str(key).lower()}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def lookup(info: Mapping[str, Any], *suffixes: str) -> Any:
    """The first value whose dotted key ends with one of ``suffixes`` (None when absent)."""
    flat = flatten(info)
    for suffix in suffixes:
        for key, value in flat.items():
            if (key == suffix or key.endswith("." + suffix)) and value not in (None, ""):
                return value
    return None


def is_replay(side: RunSide) -> bool:
    kind = str(lookup(side.run_info, "prompt_source.kind") or "")
    return "log" in kind or "replay" in kind or bool(lookup(side.run_info, "llm_prompt_log"))


def batch_size(side: RunSide) -> int:
    steps = level_rows(side.summary)
    if "batch_size" in steps and steps["batch_size"].notna().any():
        return int(steps["batch_size"].max())
    return int(lookup(side.run_info, "llm_batch_size", "batch_size") or 1)


def prefix_setting(side: RunSide) -> Any:
    """The run's prefix-caching setup: run.json's setting or shared prefix, and the server's own
    ``enable_prefix_caching`` label of ``vllm:cache_config_info`` when it was scraped."""
    on = lookup(side.run_info, "enable_prefix_caching", "prefix_caching")
    setting = on if on is not None else lookup(side.run_info, "shared_prefix_tokens")
    return (setting, server_prefix_caching(side))


def server_prefix_caching(side: RunSide) -> str | None:
    """``enable_prefix_caching`` from the server's ``vllm:cache_config_info`` labels, if any."""
    if side.run is None:
        return None
    return prefix_caching_label(side.run.server_metrics)


def replica_count(side: RunSide) -> int | None:
    if side.replicas is not None:
        return side.replicas
    value = lookup(side.run_info, "replicas")
    return int(value) if value is not None else None


def detect_kind(sides: Sequence[RunSide]) -> str:
    """The comparison kind from run.json differences (the first of the module's order that
    differs; :func:`analysis.report.compare_words.kind_reason_text` says why in words)."""
    replay = [is_replay(s) for s in sides]
    if any(replay) and not all(replay):
        return "benchmark-vs-replay"
    if len({replica_count(s) for s in sides}) > 1:
        return "replicas"
    if len({batch_size(s) for s in sides}) > 1:
        return "batch"
    if len({str(prefix_setting(s)) for s in sides}) > 1:
        return "prefix-cache"
    return "config"
