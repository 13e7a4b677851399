"""Test helper for the prefix-cache sweeps: their kv-bound simulator, their sweep, and the
simulator's own prefix-cache hit rate per stage, from its request log.

tests/e2e/test_prefix_cache_kv_sim.py explains the numbers: a KV budget of 5,632 tokens and
1,280-token prompts whose first 1,024 are one shared system prompt (4 sequences fit without the
cache, 16 with it).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.inputs.load import read_run
from analysis.stages.summary import measured_requests, stage_windows

#: the kv-bound simulator's overrides (``preset("kv-bound", **SIM)``)
SIM = {"kv_cache_tokens": 5632, "max_model_len": 2048}
#: the shared prefix, the prompt and the output, in tokens
PREFIX, INPUT, OUTPUT = 1024, 1280, 32


def prefix_sweep(url: str, out: Path, run_id: str, levels: Sequence[int], *extra: str) -> Path:
    """``loadknee run`` of ``levels`` against ``url`` with the shared prefix, 4 s stages, no
    refinement and every level swept (``extra``: more flags); the run directory it wrote."""
    args = [
        sys.executable, "-m", "loadknee_locust", "run", "--no-analyze", "--host", url,
        "--levels", ",".join(map(str, levels)), "--stage-seconds", "4",
        "--warmup-seconds", "1", "--cooldown-seconds", "0.5", "--baseline-requests", "6",
        "--input-tokens", str(INPUT), "--output-tokens", str(OUTPUT),
        "--llm-shared-prefix-tokens", str(PREFIX), "--out", str(out), "--run-id", run_id,
        "--no-refine", "--stop-after-knee", "-1", *extra,
        "--no-concurrency-probe",  # its callers test the prefix cache, not predict: skip ~2 s
    ]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out / run_id


def sim_hit_pct(run_dir: Path, log: list[dict]) -> dict[int, float]:
    """Per stage: cached over prompt tokens (the sim's log) of the requests that arrived in the
    stage's measured window."""
    run = read_run(run_dir)
    windows = stage_windows(run, measured_requests(run))
    frame = pd.DataFrame(log)
    frame = frame[frame["cached_tokens"].notna() & frame["prompt_tokens"].notna()]
    out = {}
    for stage, (start, end) in windows[["window_start", "window_end"]].iterrows():
        inside = frame[(frame["arrival_unix_s"] >= start) & (frame["arrival_unix_s"] <= end)]
        out[int(stage)] = inside["cached_tokens"].sum() / inside["prompt_tokens"].sum() * 100.0
    return out
