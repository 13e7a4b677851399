"""How much the recorder costs per request row: label + count + write, with the per-row flush
(what RunLog does) beside CsvSink's 1 s flush, in one run; prints µs per row and the ratio.

    .venv/bin/python benchmarks/bench_recorder.py [ROWS]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from loadknee_locust.record.recorder import RunLog
from loadknee_locust.sweep.schedule import Schedule, SchedulePlan

T0 = 1_000_000.0


def rows(n: int) -> list[dict[str, object]]:
    return [
        {
            "request_id": f"0-{i}",
            "worker": "0",
            "endpoint": "chat",
            "stream": True,
            "start_unix_s": T0 + i * 0.01,
            "end_unix_s": T0 + i * 0.01 + 1.2,
            "e2e_ms": 1200.0,
            "ttft_ms": 80.0,
            "tpot_ms": 9.0,
            "itl_mean_ms": 9.0,
            "itl_p50_ms": 9.0,
            "itl_p95_ms": 12.0,
            "itl_max_ms": 30.0,
            "chunks": 128,
            "prompt_tokens": 512,
            "completion_tokens": 128,
            "usage_source": "server",
            "outcome": "ok",
            "http_status": 200,
            "prompt_hash": "0123456789abcdef",
        }
        for i in range(n)
    ]


def measure(n: int, per_row_flush: bool) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        log = RunLog(Path(tmp))
        plan = SchedulePlan(
            levels=(1, 2, 4, 8), stage_seconds=60.0, warmup_seconds=30.0,
            cooldown_seconds=10.0, baseline_requests=20,
        )  # fmt: skip
        log.schedule = Schedule(plan, T0)
        data = rows(n)
        if not per_row_flush:
            log.requests.flush = lambda: None  # type: ignore[method-assign]  # CsvSink's own 1 s rule only
        t0 = time.perf_counter()
        for row in data:
            log.add(row)
        elapsed = time.perf_counter() - t0
        log.close()
    return elapsed / n * 1e6


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    flushed = measure(n, True)
    buffered = measure(n, False)
    print(f"rows: {n}")
    print(f"per-row flush (RunLog):    {flushed:7.1f} µs/row  = {1e6 / flushed:9.0f} rows/s")
    print(f"1 s flush (CsvSink alone): {buffered:7.1f} µs/row  = {1e6 / buffered:9.0f} rows/s")
    print(f"ratio: {flushed / buffered:.2f}x")


if __name__ == "__main__":
    main()
