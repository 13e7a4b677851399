"""Runs to compare, shared by the value tests of ``loadknee compare`` (tests/analysis/compare/
test_compare.py) and the golden file that pins what its readings say (tests/analysis/report/
test_golden_compare_words.py): the seed-002 record table, scaled, under each kind's run.json."""

from __future__ import annotations

import dataclasses
from typing import Any

from analysis.compare.core import RunSide, lookup
from tests.support.report_fixtures import seed002_knee, seed002_summary

FIXED = {"prompt_source": {"kind": "fixed", "shared_prefix_tokens": 0}}
REPLAY = {"prompt_source": {"kind": "log_replay", "shared_prefix_tokens": 0}}


def compare_side(
    label: str,
    *,
    tok_scale: float = 1.0,
    run_info: dict[str, Any] | None = None,
    max_conc: int = 24,
    knee_users: int = 32,
    **kw: Any,
) -> RunSide:
    """The fixture run (:func:`seed002_summary`) as ``label``: its output tok/s ×
    ``tok_scale``, its knee and max_concurrency as given."""
    summary = seed002_summary()
    summary["output_tok_s"] = summary["output_tok_s"] * tok_scale
    summary["batch_size"] = lookup(run_info or {}, "llm_batch_size") or 1  # as stages.csv says
    knee = dataclasses.replace(seed002_knee(), max_concurrency=max_conc, knee_users=knee_users)
    return RunSide(label, summary, knee, run_info if run_info is not None else FIXED, **kw)


def broken_after() -> RunSide:
    """A config change's 'after' run whose stage at the recommended 24 users is the knee."""
    worse = seed002_knee()
    stages = tuple(
        dataclasses.replace(sv, verdict="knee") if sv.target_users == 24 else sv
        for sv in worse.stages
    )
    return RunSide("after", seed002_summary(), dataclasses.replace(worse, stages=stages), FIXED)


def replay_sides() -> list[RunSide]:
    """A replay (half the tok/s, max_concurrency 16, knee 24) and its benchmark, replay first."""
    bench = compare_side("bench")
    replay = compare_side("replay", run_info=REPLAY, tok_scale=0.5, max_conc=16, knee_users=24)
    return [replay, bench]


def batch_sides() -> list[RunSide]:
    """Batch size 1 against 4."""
    batched = compare_side("b4", run_info={"parameters": {"llm_batch_size": 4}, **FIXED})
    return [compare_side("b1"), batched]
