"""How long ``loadknee analyze`` spends writing its report on a 1-million-request run.

Writes a contract-shaped run directory with N request rows (default 1,000,000; numpy, a closed
form server with a knee), then times, in one process and one run: pandas' own read of
requests.csv (the yardstick), the analysis pipeline (read → summary → knee → advice) and each
report step (tables + knee.json, each PNG, the HTML). Prints one line per step with seconds and
the ratio to the plain CSV read.

    .venv/bin/python benchmarks/bench_report_1m.py [--rows 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from bench_analysis_1m import synthetic_requests  # a sibling: run as a script from this folder

from analysis.pipeline import analyze_run
from analysis.report.plots import latency_figure, png_bytes, throughput_figure, timeline_figure
from analysis.report.table import format_csv, format_markdown, record_frame
from analysis.report.writer import write_report
from loadknee_core import contract

LEVELS = (1, 2, 4, 8, 16, 24, 32, 48, 64)
SLOTS = 16


def write_big_run(root: Path, rows: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    stage_s, warm_s, t0 = 120.0, 30.0, 1_760_000_000.0
    stages = []
    for i, users in enumerate(LEVELS):
        start = t0 + i * (stage_s + 10)
        stages.append(
            {
                "stage": i,
                "kind": "step",
                "target_users": users,
                "batch_size": 1,
                "start_unix_s": start,
                "warmup_end_unix_s": start + warm_s,
                "measure_end_unix_s": start + stage_s,
                "end_unix_s": start + stage_s + 10,
                "stop_reason": "duration",
            }
        )
    pd.DataFrame(stages, columns=contract.STAGE_COLUMNS).to_csv(root / "stages.csv", index=False)
    weights = np.array(LEVELS, dtype=float) / max(1.0, 1.0)
    stage = rng.choice(len(LEVELS), size=rows, p=weights / weights.sum())
    users = np.array(LEVELS)[stage]
    start = t0 + stage * (stage_s + 10) + rng.uniform(0, stage_s - 3, rows)
    e2e = 250.0 * np.maximum(1.0, users / SLOTS) * rng.uniform(0.9, 1.2, rows)
    ok = rng.random(rows) > 0.001
    frame = synthetic_requests(
        start, e2e, np.where(ok, "ok", "timeout"), input_tokens=256, output_tokens=64,
        request_id=np.char.add("local-", np.arange(rows).astype(str)),
        stage=stage,
        phase=np.where(start - (t0 + stage * (stage_s + 10)) < warm_s, "warmup", "measure"),
        user_id=rng.integers(0, 64, rows),
        ttft_ms=e2e * 0.08,
        tpot_ms=e2e * 0.92 / 63,
        itl_mean_ms=7.5,
        itl_p50_ms=7.4,
        itl_p95_ms=9.0,
        itl_max_ms=12.0,
        prompt_hash="abc",
    )  # fmt: skip
    frame.to_csv(root / "requests.csv", index=False)
    ts = np.arange(t0, t0 + len(LEVELS) * (stage_s + 10), 0.5)
    gpu = pd.DataFrame(
        {
            "timestamp_unix_s": ts,
            "gpu_index": 0,
            "source": "sim",
            "memory_used_mib": 60000 + rng.uniform(0, 8000, len(ts)),
            "memory_total_mib": 81920,
            "gpu_util_pct": rng.uniform(30, 100, len(ts)),
        },
        columns=contract.GPU_COLUMNS,
    )
    gpu.to_csv(root / "gpu.csv", index=False)
    (root / "run.json").write_text(json.dumps({"run_id": root.name, "levels": list(LEVELS)}))


def timed(label: str, fn, base: float | None, results: list) -> object:
    start = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - start
    results.append((label, seconds))
    ratio = f"{seconds / base:6.2f}× the CSV read" if base else ""
    print(f"{label:<34} {seconds:8.2f} s  {ratio}", flush=True)
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="write the run here and keep it")
    ns = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = ns.keep or Path(tmp) / "big-run"
        results: list = []
        timed(f"generate {ns.rows:,} rows", lambda: write_big_run(root, ns.rows), None, results)
        start = time.perf_counter()
        pd.read_csv(root / "requests.csv")
        base = time.perf_counter() - start
        print(f"{'pandas read_csv(requests.csv)':<34} {base:8.2f} s  (yardstick)")
        analysis = timed("analysis pipeline", lambda: analyze_run(root), base, results)
        record = record_frame(analysis.summary, analysis.knee)
        timed(
            "tables (csv + markdown)",
            lambda: (format_csv(record), format_markdown(record)),
            base,
            results,
        )
        timed(
            "latency.png",
            lambda: png_bytes(latency_figure(analysis.summary, analysis.knee)),
            base,
            results,
        )
        timed(
            "throughput.png",
            lambda: png_bytes(throughput_figure(analysis.summary, analysis.knee)),
            base,
            results,
        )
        run = analysis.run
        timed(
            "timeline.png",
            lambda: png_bytes(
                timeline_figure(stages=run.stages, requests=run.requests, gpu=run.gpu)
            ),
            base,
            results,
        )
        timed(
            "write_report (everything)",
            lambda: write_report(analysis, Path(tmp) / "report"),
            base,
            results,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
