"""Test helper: write contract-shaped run directories from plain row dicts (CsvSink, run.json).

Used by the analysis tests (load, summary, baseline, knee on the simulator). ``stage_row`` and
``request_row`` fill in sensible defaults so a test states only what it is about.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from loadknee_core import contract
from loadknee_locust.record.csvsink import CsvSink


def stage_row(
    stage: int,
    users: int,
    start: float,
    *,
    kind: str = "step",
    warmup_s: float = 1.0,
    measure_s: float = 10.0,
) -> dict[str, Any]:
    """A stages.csv row: one request per user at a time, a one-second cool-down."""
    return {
        "stage": stage,
        "kind": kind,
        "target_users": users,
        "batch_size": 1,
        "start_unix_s": start,
        "warmup_end_unix_s": start + warmup_s,
        "measure_end_unix_s": start + warmup_s + measure_s,
        "end_unix_s": start + warmup_s + measure_s + 1.0,
        "stop_reason": "duration",
    }


def request_row(
    n: int,
    stage: int,
    start: float,
    e2e_ms: float,
    *,
    phase: str = "measure",
    outcome: str = "ok",
    prompt_tokens: float | None = 100,
    completion_tokens: float | None = 50,
    **extra: Any,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "request_id": f"local-{n}",
        "stage": stage,
        "phase": phase,
        "worker": "local",
        "user_id": 0,
        "endpoint": "chat",
        "stream": 1,
        "batch_size": 1,
        "start_unix_s": start,
        "end_unix_s": start + e2e_ms / 1000.0,
        "e2e_ms": e2e_ms,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "usage_source": "server",
        "outcome": outcome,
        "http_status": 200 if outcome in ("ok", "length_mismatch") else 503,
        "length_ok": 0 if outcome == "length_mismatch" else 1,
    }
    row.update(extra)
    return row


def write_csv(path: Path, columns: Iterable[str], rows: Iterable[Mapping[str, Any]]) -> None:
    sink = CsvSink(path, columns)
    try:
        sink.write_many(rows)
    finally:
        sink.close()


def write_run(
    run_dir: Path,
    *,
    stages: Iterable[Mapping[str, Any]],
    requests: Iterable[Mapping[str, Any]],
    gpu: Iterable[Mapping[str, Any]] | None = None,
    server_metrics: Iterable[Mapping[str, Any]] | None = None,
    client: Iterable[Mapping[str, Any]] | None = None,
    run_info: Mapping[str, Any] | None = None,
) -> Path:
    """Write the files of one run; optional files only when rows are given."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / contract.RUN_JSON).write_text(json.dumps(dict(run_info or {"run_id": "test"})))
    write_csv(run_dir / contract.STAGES_CSV, contract.STAGE_COLUMNS, stages)
    write_csv(run_dir / contract.REQUESTS_CSV, contract.REQUEST_COLUMNS, requests)
    optional = (
        (contract.GPU_CSV, contract.GPU_COLUMNS, gpu),
        (contract.SERVER_METRICS_CSV, contract.SERVER_METRIC_COLUMNS, server_metrics),
        (contract.CLIENT_CSV, contract.CLIENT_COLUMNS, client),
    )
    for name, columns, rows in optional:
        if rows is not None:
            write_csv(run_dir / name, columns, rows)
    return run_dir


def saturating_run(
    run_dir: Path,
    *,
    capacity: int,
    levels: tuple[int, ...] = (1, 2, 4, 8, 16),
    e2e_ms: float = 400.0,
) -> Path:
    """Closed-loop users, no think time: e2e ``e2e_ms`` up to ``capacity`` users, then it grows
    with the users (more only queue), so the knee is known by construction."""
    stages, rows, t, n = [], [], 1_000.0, 0
    for stage, (kind, users) in enumerate([("baseline", 1), *(("step", u) for u in levels)]):
        stages.append(stage_row(stage, users, t, kind=kind, warmup_s=1.0, measure_s=20.0))
        e2e = e2e_ms * max(1.0, users / capacity)
        for u in range(users):
            s = t + 0.01 * u
            while s < t + 21.0:
                phase = "warmup" if s < t + 1.0 else "baseline" if kind == "baseline" else "measure"
                rows.append(request_row(n, stage, s, e2e, phase=phase, ttft_ms=20.0))
                n, s = n + 1, s + e2e / 1000.0
        t += 23.0
    return write_run(run_dir, stages=stages, requests=rows)
