"""Prefix caching end to end: the same sweep against the simulator with the cache on and off.

Both runs send 1280-token chat prompts whose first 1024 tokens are one shared system prompt
(``--llm-shared-prefix-tokens 1024``) to a simulator whose prefill is costly (0.1 ms a token), so
the 64 cached blocks (1024 tokens) of every hit spare ~102 ms of prefill and move the compute
limit past the KV limit. Checked against the simulator's own truth: each stage's hit rate equals
the one its request log gives (cached over prompt tokens of the requests that arrived in the
window) within 1 point; hits' TTFT is below misses'; with the cache off the hit rate is 0; the
knee is where :func:`~loadknee_locust.sim.saturation.predicted_knee_level` puts it with and
without the cached tokens; ``loadknee compare --kind prefix-cache`` states the change with the
numbers of both run directories.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.inputs.load import read_run
from analysis.pipeline import analyze_run
from analysis.summary import measured_requests, stage_windows
from loadknee_locust.sim.launch import SimProcess
from loadknee_locust.sim.params import preset
from loadknee_locust.sim.saturation import predicted_knee_level

pytestmark = pytest.mark.slow

LEVELS = (4, 8, 16)
SIM = {"max_num_seqs": 32, "prefill_ms_per_token": 0.1}
PREFIX, INPUT, OUTPUT = 1024, 1280, 32


def _loadknee(*args: str, timeout_s: float = 300.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loadknee_locust", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def _sweep(out: Path, run_id: str, caching: bool) -> tuple[Path, list[dict]]:
    with SimProcess.start("fast", enable_prefix_caching=caching, **SIM) as sim:
        done = _loadknee(
            "run", "--host", sim.url, "--levels", ",".join(map(str, LEVELS)),
            "--stage-seconds", "4", "--warmup-seconds", "1", "--cooldown-seconds", "0.5",
            "--baseline-requests", "8", "--input-tokens", str(INPUT),
            "--output-tokens", str(OUTPUT), "--llm-shared-prefix-tokens", str(PREFIX),
            "--out", str(out), "--run-id", run_id, "--no-refine", "--stop-after-knee", "-1",
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        log = sim.log()
    return out / run_id, log


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[dict]]]:
    out = tmp_path_factory.mktemp("prefix")
    return {"on": _sweep(out, "cache-on", True), "off": _sweep(out, "cache-off", False)}


def _truth(run_dir: Path, log: list[dict]) -> dict[int, float]:
    """Per stage: the sim's own hit % over the requests of the load that arrived in the window."""
    run = read_run(run_dir)
    windows = stage_windows(run, measured_requests(run))
    frame = pd.DataFrame(log)
    frame = frame[frame["cached_tokens"].notna() & frame["prompt_tokens"].notna()]
    out = {}
    for stage, (start, end) in windows[["window_start", "window_end"]].iterrows():
        inside = frame[(frame["arrival_unix_s"] >= start) & (frame["arrival_unix_s"] <= end)]
        out[int(stage)] = inside["cached_tokens"].sum() / inside["prompt_tokens"].sum() * 100.0
    return out


def test_each_stage_hit_rate_is_the_simulators_own(runs) -> None:
    for name in ("on", "off"):
        run_dir, log = runs[name]
        summary = analyze_run(run_dir).summary.set_index("stage")
        truth = _truth(run_dir, log)
        assert len(truth) == len(LEVELS) + 1
        for stage, expected in truth.items():
            measured = summary.at[stage, "prefix_cache_hit_pct"]
            assert measured == pytest.approx(expected, abs=1.0), (name, stage)
        if name == "off":
            assert (summary["prefix_cache_hit_pct"] == 0).all()
        else:  # 1024 of 1280 prompt tokens come from the cache once it is warm
            steps = summary[summary["kind"] == "step"]["prefix_cache_hit_pct"]
            assert steps.between(79.0, 81.0).all(), steps


def test_hits_come_back_sooner_than_misses(runs) -> None:
    on_dir, on_log = runs["on"]
    rows = pd.read_csv(on_dir / "requests.csv").set_index("request_id")
    log = pd.DataFrame(on_log).set_index("request_id")
    joined = rows.join(log[["cached_tokens"]], how="inner").dropna(subset=["ttft_ms"])
    hits, misses = joined[joined["cached_tokens"] > 0], joined[joined["cached_tokens"] == 0]
    assert len(misses) >= 1 and len(hits) > 50
    assert hits["ttft_ms"].median() < misses["ttft_ms"].median()
    # one user at a time: the baseline's TTFT falls by about the prefill of the cached tokens
    base_on = analyze_run(on_dir).summary.set_index("stage").at[0, "ttft_p50_ms"]
    base_off = analyze_run(runs["off"][0]).summary.set_index("stage").at[0, "ttft_p50_ms"]
    spared = PREFIX * SIM["prefill_ms_per_token"]
    assert base_off - base_on == pytest.approx(spared, rel=0.3), (base_off, base_on)


def test_the_knee_moves_where_the_simulator_predicts(runs) -> None:
    params = preset("fast", **SIM)
    for name, cached in (("on", PREFIX), ("off", 0)):
        expected = predicted_knee_level(params, LEVELS, INPUT, OUTPUT, cached_tokens=cached)
        knee = analyze_run(runs[name][0]).knee
        assert knee.knee_users == expected, (name, knee.summary)


def test_compare_prefix_cache_states_the_change_from_both_runs(runs, tmp_path: Path) -> None:
    on_dir, off_dir = runs["on"][0], runs["off"][0]
    done = _loadknee("compare", "--kind", "prefix-cache", str(off_dir), str(on_dir),
                     "--json", str(tmp_path / "cmp.json"))  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads((tmp_path / "cmp.json").read_text())["prefix_cache"]
    off, on = analyze_run(off_dir), analyze_run(on_dir)
    off_steps = off.summary[off.summary["kind"] == "step"]
    on_steps = on.summary[on.summary["kind"] == "step"]
    assert data["a"]["hit_pct"] == pytest.approx(0.0, abs=0.01)
    assert data["b"]["hit_pct"] == pytest.approx(
        on_steps["prefix_cache_hits"].sum() / on_steps["prefix_cache_queries"].sum() * 100, abs=0.01
    )
    assert data["a"]["knee_users"] == off.knee.knee_users
    assert data["b"]["knee_users"] == on.knee.knee_users
    level = data["ttft_level"]
    a_row = off_steps[off_steps["target_users"] == level].iloc[0]
    b_row = on_steps[on_steps["target_users"] == level].iloc[0]
    assert data["a"]["ttft_p95_ms"] == pytest.approx(a_row["ttft_p95_ms"])
    assert data["b"]["ttft_p95_ms"] == pytest.approx(b_row["ttft_p95_ms"])
    low, high = data["ttft_p95_change_pct_interval"]
    assert low <= data["ttft_p95_change_pct"] <= high
    assert "hit rate" in done.stdout and "knee" in done.stdout
