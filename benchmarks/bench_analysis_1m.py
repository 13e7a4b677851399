"""Benchmark: analyse a 1-million-request run next to pandas' own read of the same CSV.

Writes a synthetic run directory (9 step stages 1…64 users, plus a baseline; contract columns;
a saturating server so the knee is real) into a temporary folder, then times in one process:

* ``pandas.read_csv(requests.csv)`` with default options (the floor: reading the bytes);
* ``read_run`` (validated, dtype hints), ``summarize_stages``, ``compute_baseline``,
  ``find_knee`` + ``diagnose``, ``recommend``, each and in total.

Run: ``python benchmarks/bench_analysis_1m.py [--rows 1000000] [--keep DIR]``. The goal is the
whole analysis under a minute; the ratio to ``read_csv`` shows what validation and the summary
add on top of parsing.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.baseline import compute_baseline
from analysis.diagnosis import diagnose
from analysis.inputs.load import read_run
from analysis.knee import find_knee
from analysis.recommend import recommend
from analysis.summary import summarize_stages
from loadknee_locust import contract

LEVELS = (1, 2, 4, 8, 16, 24, 32, 48, 64)
SLOTS = 24  # the synthetic server saturates here: the knee is the first level above (32)


def write_synthetic_run(run_dir: Path, rows: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    # rows per stage follow the served throughput: linear up to SLOTS users, flat after
    weights = np.minimum(np.array([1, *LEVELS], dtype=float), SLOTS)
    per_stage = np.floor(rows * weights / weights.sum()).astype(int)
    per_stage[-1] += rows - per_stage.sum()
    stage_rows, frames, t = [], [], 1_700_000_000.0
    for index, count in enumerate(per_stage):
        users = 1 if index == 0 else LEVELS[index - 1]
        queue = max(1.0, users / SLOTS)
        e2e = rng.lognormal(np.log(250.0 * queue * (1 + users / 32)), 0.25, count)
        window = 180.0
        start = t + 30.0 + np.sort(rng.uniform(0, window, count))
        phase = np.where(rng.uniform(size=count) < 0.05, "warmup", "measure")
        if index == 0:
            phase = np.full(count, "baseline")
        outcome = np.where(rng.uniform(size=count) < 0.002, "timeout", "ok")
        frames.append(
            pd.DataFrame(
                {
                    "request_id": [f"w{index}-{i}" for i in range(count)],
                    "stage": index,
                    "phase": phase,
                    "worker": "local",
                    "user_id": rng.integers(0, users, count),
                    "endpoint": "chat",
                    "stream": 1,
                    "batch_size": 1,
                    "start_unix_s": start,
                    "end_unix_s": start + e2e / 1000.0,
                    "e2e_ms": e2e,
                    "ttft_ms": e2e * 0.1,
                    "tpot_ms": e2e * 0.9 / 255,
                    "itl_mean_ms": e2e * 0.9 / 255,
                    "itl_p50_ms": e2e * 0.85 / 255,
                    "itl_p95_ms": e2e * 1.5 / 255,
                    "itl_max_ms": e2e * 3 / 255,
                    "chunks": 256,
                    "prompt_tokens": 512,
                    "completion_tokens": 256,
                    "usage_source": "server",
                    "target_input_tokens": 512,
                    "target_output_tokens": 256,
                    "length_ok": 1,
                    "outcome": outcome,
                    "http_status": np.where(outcome == "ok", 200, np.nan),
                    "error": "",
                    "prompt_hash": "ab12cd34",
                },
                columns=list(contract.REQUEST_COLUMNS),
            )
        )
        stage_rows.append(
            {
                "stage": index,
                "kind": "baseline" if index == 0 else "step",
                "target_users": users,
                "batch_size": 1,
                "start_unix_s": t,
                "warmup_end_unix_s": t + 30.0,
                "measure_end_unix_s": t + 30.0 + window,
                "end_unix_s": t + 35.0 + window,
                "stop_reason": "duration",
            }
        )
        t += 40.0 + window
    pd.concat(frames).to_csv(run_dir / contract.REQUESTS_CSV, index=False)
    pd.DataFrame(stage_rows, columns=list(contract.STAGE_COLUMNS)).to_csv(
        run_dir / contract.STAGES_CSV, index=False
    )
    (run_dir / contract.RUN_JSON).write_text(json.dumps({"run_id": "bench-1m"}))


def _timed(label: str, times: dict[str, float], fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    times[label] = time.perf_counter() - start
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, default=None, help="write the run here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.keep or Path(tmp) / "run"
        start = time.perf_counter()
        write_synthetic_run(run_dir, args.rows)
        size_mb = (run_dir / contract.REQUESTS_CSV).stat().st_size / 1e6
        print(
            f"wrote {args.rows:,} rows ({size_mb:,.0f} MB) in {time.perf_counter() - start:.1f} s"
        )
        times: dict[str, float] = {}
        _timed("pandas.read_csv", times, pd.read_csv, run_dir / contract.REQUESTS_CSV)
        run = _timed("read_run", times, read_run, run_dir)
        summary = _timed("summarize_stages", times, summarize_stages, run)
        baseline = _timed("compute_baseline", times, compute_baseline, run, summary)
        knee = _timed("find_knee+diagnose", times, lambda: diagnose(
            summary, find_knee(summary, baseline), baseline))  # fmt: skip
        _timed("recommend", times, recommend, summary, knee, baseline, run_info=run.run_info)
    total = sum(v for k, v in times.items() if k != "pandas.read_csv")
    floor = times["pandas.read_csv"]
    for label, seconds in times.items():
        print(f"{label:<20} {seconds:7.2f} s")
    print(f"{'analysis total':<20} {total:7.2f} s  = {total / floor:.2f}× pandas.read_csv alone")
    print(f"knee: {knee.summary}")


if __name__ == "__main__":
    main()
