"""The Knee tab's rows from a run log (no web server): stages seen so far, stdlib percentiles."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from loadknee_locust.record.recorder import RunLog
from loadknee_locust.sweep.schedule import Schedule, SchedulePlan
from loadknee_locust.webui.tab import COLUMNS, rows_csv, stage_rows

T0 = 7_000.0


def test_stage_rows_and_csv(tmp_path: Path) -> None:
    run = RunLog(tmp_path)
    assert stage_rows(run) == []  # no schedule yet
    plan = SchedulePlan(
        (1, 4, 8),
        stage_seconds=10.0,
        warmup_seconds=2.0,
        cooldown_seconds=10.0,
        baseline_requests=0,
    )
    run.schedule = Schedule(plan, T0)
    for i in range(10):  # stage 0, measured, 100..190 ms
        start = T0 + 2.5 + i * 0.5
        run.add({"request_id": str(i), "start_unix_s": start, "end_unix_s": start + 0.1,
                 "e2e_ms": 100.0 + 10 * i, "outcome": "ok", "completion_tokens": 5})  # fmt: skip
    run.schedule.advance(T0 + 12.0)  # users dropped: the 10 s cooldown starts
    run.schedule.advance(T0 + 22.0)  # stage 1 begins
    rows = stage_rows(run)
    assert [(r["stage"], r["phase"], r["users"]) for r in rows] == [
        (0, "done", 1),
        (1, "warmup", 4),
    ]
    assert rows[0]["measured"] == 10 and rows[0]["e2e_p50_ms"] == 145.0
    assert rows[0]["ttft_p50_ms"] is None  # no data is None, never 0
    parsed = list(csv.DictReader(io.StringIO(rows_csv(rows))))
    assert list(parsed[0]) == [key for key, _ in COLUMNS]
    assert parsed[0]["e2e_p95_ms"] == "185.5" and parsed[0]["ttft_p95_ms"] == ""
    run.close()


def test_stage_rows_show_the_prefix_cache_from_the_usage(tmp_path: Path) -> None:
    run = RunLog(tmp_path)
    plan = SchedulePlan((4,), stage_seconds=10.0, warmup_seconds=0.0, cooldown_seconds=1.0,
                        baseline_requests=0)  # fmt: skip
    run.schedule = Schedule(plan, T0)
    # 3 hits (1024 of 1280 tokens cached) at 40-60 ms, 1 miss at 150 ms, 1 error and 1 row
    # whose server did not report cached tokens: both left out
    rows = [(1024, 40.0), (1024, 50.0), (1024, 60.0), (0, 150.0), (None, 500.0)]
    for i, (cached, ttft) in enumerate(rows):
        start = T0 + 1 + i * 0.1
        run.add({"request_id": str(i), "start_unix_s": start, "end_unix_s": start + 0.2,
                 "e2e_ms": 200.0, "ttft_ms": ttft, "outcome": "ok", "completion_tokens": 5,
                 "prompt_tokens": 1280, "cached_tokens": cached})  # fmt: skip
    run.add({"request_id": "e", "start_unix_s": T0 + 2, "end_unix_s": T0 + 2.1, "e2e_ms": 1.0,
             "outcome": "http_error", "prompt_tokens": 1280, "cached_tokens": 0})  # fmt: skip
    (row,) = stage_rows(run)
    assert row["cache_hit_pct"] == round(100 * 3 * 1024 / (4 * 1280), 1) == 60.0
    assert (row["hit_ttft_p50_ms"], row["miss_ttft_p50_ms"]) == (50.0, 150.0)
    run.close()
    (tmp_path / "bare").mkdir()
    bare = RunLog(tmp_path / "bare")
    bare.schedule = Schedule(plan, T0)
    bare.add({"request_id": "1", "start_unix_s": T0 + 1, "end_unix_s": T0 + 1.2, "e2e_ms": 200.0,
              "ttft_ms": 20.0, "outcome": "ok", "prompt_tokens": 1280})  # fmt: skip
    (row,) = stage_rows(bare)
    assert row["cache_hit_pct"] is None and row["hit_ttft_p50_ms"] is None  # blank, never 0
    bare.close()
