"""Benchmark: ``loadknee trace`` on a 1-million-line trace next to ``pandas.read_csv`` of the file.

Writes two synthetic 1M-row CSVs into a temporary folder (Poisson arrivals at 50/s, about 5.6 h;
lognormal lengths):

* ``azure.csv``: the Azure LLM inference trace's columns, ``TIMESTAMP`` as a date-time text with
  7 fractional digits (the in-flight curve from Little's law, ``--latency-seconds 2``);
* ``log.csv``: a prompt log's lengths with unix ``timestamp`` and ``latency_ms`` (the in-flight
  curve from the logged durations).

Each measurement runs in a fresh Python process, so its peak memory is its own: the time of the
work and the peak resident memory it added above the process after its imports (``ru_maxrss``).
Measured per file: ``pandas.read_csv`` with default options (the floor: parsing the bytes into
columns, no dates; for the Azure file also with ``pd.to_datetime`` of its times), and the
trace's whole shape (``read_trace`` + ``traffic_shape``: reading, time parsing, sweep, bins,
tallies).

Run: ``python benchmarks/bench_trace_1m.py [--rows 1000000] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

T0 = datetime(2024, 5, 10, tzinfo=UTC).timestamp()

TASK = r"""
import json, resource, sys, time
path, task = sys.argv[1], sys.argv[2]
import pandas as pd
from datetime import UTC
from analysis.traffic.shape import LatencyModel, ShapeParams, traffic_shape
from loadknee_core.traces import read_trace
def rss_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
before = rss_kib()
t = time.perf_counter()
if task == "pandas":
    n = len(pd.read_csv(path))
elif task == "pandas_dates":
    frame = pd.read_csv(path)
    n = len(pd.to_datetime(frame["TIMESTAMP"], format="ISO8601"))
else:
    latency = LatencyModel(2.0, "bench") if "azure" in path else None
    read, records = read_trace(path, tz=UTC)
    shape = traffic_shape(records, ShapeParams(latency=latency))
    n = shape.requests
seconds = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"rows": n, "seconds": seconds, "peak_mib": (peak - before) / 1024}))
"""


def write_files(folder: Path, rows: int, seed: int = 0) -> dict[str, Path]:
    rng = np.random.default_rng(seed)
    starts = T0 + np.cumsum(rng.exponential(1 / 50, rows))
    n_in = rng.lognormal(np.log(800), 0.8, rows).astype(int) + 1
    n_out = rng.lognormal(np.log(150), 0.7, rows).astype(int) + 1
    latency_ms = (200 + n_out * 25 * rng.uniform(0.8, 1.2, rows)).round(1)
    azure, log = folder / "azure.csv", folder / "log.csv"
    with open(azure, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
        for s, i, o in zip(starts, n_in, n_out, strict=True):
            stamp = datetime.fromtimestamp(float(s), UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
            w.writerow([stamp + "0", int(i), int(o)])
    with open(log, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["timestamp", "input_tokens", "output_tokens", "latency_ms"])
        for row in zip(starts.round(3), n_in, n_out, latency_ms, strict=True):
            w.writerow(row)
    return {"azure.csv": azure, "log.csv": log}


def measure(path: Path, task: str) -> dict[str, float]:
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", TASK, str(path), task],
        check=True, capture_output=True, text=True, cwd=root,
    )  # fmt: skip
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        files = write_files(folder, args.rows)
        print(f"{'file':<10} {'MiB':>5}  {'task':<22} {'seconds':>8} {'peak MiB':>9}  ratio")
        for name, path in files.items():
            size = path.stat().st_size / 2**20
            floor = measure(path, "pandas")
            ours = measure(path, "trace")
            assert ours["rows"] == floor["rows"] == args.rows, (ours, floor)
            tasks = [("pandas.read_csv", floor), ("loadknee trace (shape)", ours)]
            if name == "azure.csv":
                tasks.insert(1, ("read_csv + to_datetime", measure(path, "pandas_dates")))
            for label, m in tasks:
                ratio = m["seconds"] / floor["seconds"]
                print(
                    f"{name:<10} {size:5.0f}  {label:<22} {m['seconds']:8.2f} "
                    f"{m['peak_mib']:9.1f}  {ratio:4.1f}× time"
                )


if __name__ == "__main__":
    main()
