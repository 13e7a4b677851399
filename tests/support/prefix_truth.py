"""Test helper: the simulator's own prefix-cache hit rate per stage, from its request log."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.inputs.load import read_run
from analysis.stages.summary import measured_requests, stage_windows


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
