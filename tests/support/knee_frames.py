"""Test helper: per-stage summary frames typed in by hand (a record table fed in as data)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from analysis.model import SUMMARY_COLUMNS
from analysis.stages.intervals import StageBatches

NAN = float("nan")

#: the vLLM source's record table (docs/method.md, Sources): users, P50 s, P99 s, tok/s,
#: memory %, success %, verdict (one home: the report fixtures, report_fixtures.py, use it too)
SEED_002_TABLE = (
    (4, 0.6, 1.0, 220.0, 62.0, 100.0, "comfortable"),
    (16, 0.9, 1.1, 760.0, 78.0, 100.0, "comfortable"),
    (24, 1.8, 2.8, 880.0, 85.0, 100.0, "critical"),
    (32, 4.5, 9.0, 910.0, 97.0, 98.0, "knee"),
    (48, 12.0, NAN, NAN, 100.0, 80.0, "red_line"),  # P99 "OOM", throughput "—"
)


def stage(users: int, **values: Any) -> dict[str, Any]:
    """One summary row: a served step stage with no telemetry unless given."""
    row: dict[str, Any] = dict.fromkeys(SUMMARY_COLUMNS, NAN)
    row.update(
        kind="step", target_users=users, batch_size=1, window_s=120.0, requests=1000, ok=1000,
        errors=0, length_mismatch=0, success_pct=100.0,
    )  # fmt: skip
    row.update(values)
    if "errors" in values and "success_pct" not in values:
        served = row["ok"] + row["errors"]
        row["success_pct"] = 100.0 * row["ok"] / served if served else NAN
    return row


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Number the stages in order and return a frame with exactly SUMMARY_COLUMNS."""
    for index, row in enumerate(rows):
        row.setdefault("stage", index)
        if not isinstance(row["stage"], int) or np.isnan(row["stage"]):
            row["stage"] = index
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def seed_002_summary() -> pd.DataFrame:
    rows = []
    for users, p50, p99, tok, mem, success, _ in SEED_002_TABLE:
        ok = int(success * 10)
        rows.append(
            stage(
                users,
                e2e_p50_ms=p50 * 1000,
                e2e_p99_ms=p99 * 1000,
                output_tok_s=tok,
                gpu_mem_peak_pct=mem,
                ok=ok,
                errors=1000 - ok,
                success_pct=success,
            )
        )
    return frame(rows)


def sweep(
    levels: list[int],
    tok_s: list[float],
    p95_ms: list[float],
    *,
    baseline_tok_s: float | None = None,
    baseline_p95_ms: float | None = None,
    **columns: list[Any],
) -> pd.DataFrame:
    """A baseline stage (1 user) then step stages; extra columns given as per-step lists."""
    rows = []
    if baseline_tok_s is not None:
        rows.append(
            stage(
                1,
                kind="baseline",
                output_tok_s=baseline_tok_s,
                e2e_p50_ms=baseline_p95_ms,
                e2e_p95_ms=baseline_p95_ms,
                e2e_p99_ms=baseline_p95_ms,
                ok=20,
                requests=20,
            )
        )
    for i, users in enumerate(levels):
        extra = {name: values[i] for name, values in columns.items()}
        rows.append(stage(users, output_tok_s=tok_s[i], e2e_p95_ms=p95_ms[i], **extra))
    return frame(rows)


#: a server with 12 slots seen at 8, 16 and 24 users: 16 fill it and queue 4 on average
TWELVE_SLOTS = {
    "running_mean": [8.0, 11.5, 12.0],
    "running_max": [8.0, 12.0, 12.0],
    "waiting_mean": [0.0, 4.0, 12.0],
}


def twelve_slots(tok_s: list[float], p95_ms: list[float], **gauges: list[Any]) -> pd.DataFrame:
    """A sweep of 8, 16 and 24 users against the 12-slot server of :data:`TWELVE_SLOTS` (its
    gauges replaced by ``gauges``), after a baseline of 100 tok/s at P95 250 ms."""
    return sweep(
        [8, 16, 24], tok_s, p95_ms, baseline_tok_s=100.0, baseline_p95_ms=250.0,
        **{**TWELVE_SLOTS, **gauges},
    )  # fmt: skip


def drawn_batches(
    summary: pd.DataFrame,
    rng: np.random.Generator,
    *,
    windows: int,
    rate_spread: float,
    tail_spread: float,
    sizes: Callable[[int], Iterable[int]],
    without: int,
    whole_ms: bool = False,
) -> dict[int, StageBatches]:
    """Per-window data drawn around each stage's own figures, for the tests that resample a
    sweep: ``windows`` output rates of ``tok_s × N(1, rate_spread)`` and, per window, ``sizes
    (stage)`` e2e values lognormal around ``P95 / 1.6`` (``whole_ms``: rounded to the ms).
    Stage ``without`` gets none, as a stage without per-window data keeps its figures. One
    home, so the knee's resampled inputs and the resampled tables are tested on data drawn the
    same way (the draws' order is part of it: rates, then sizes, then the groups)."""
    batches: dict[int, StageBatches] = {}
    for stage, tok, p95 in zip(
        summary["stage"], summary["output_tok_s"], summary["e2e_p95_ms"], strict=True
    ):
        if stage == without:
            continue
        rates = tuple(float(r) for r in tok * rng.normal(1.0, rate_spread, windows))
        drawn = [rng.lognormal(np.log(p95 / 1.6), tail_spread, k) for k in sizes(int(stage))]
        groups = tuple(g.round(0) if whole_ms else g for g in drawn)
        batches[int(stage)] = StageBatches(
            int(stage), 60.0, windows, 1.0, rates, groups, None, None, None
        )
    return batches
