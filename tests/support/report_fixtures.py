"""Synthetic inputs for the report tests: the vLLM source's record table as analysis objects, and a
contract-shaped run directory written from a tiny closed-form server model.

Not a test module (no ``test_`` prefix): the report/table/plot/CLI/compare tests import it.
"""

from __future__ import annotations

import csv
import json
import math
import random
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import pytest

from analysis.advice.facts import Recommendation, Recommendations
from analysis.model import SUMMARY_COLUMNS, Baseline, KneeResult, Signal, StageVerdict
from loadknee_core import contract
from tests.support.knee_frames import SEED_002_TABLE

SECRET = "sk-test-DO-NOT-LEAK-0123456789"
#: every request of the synthetic run: a fixed prompt, the answer streamed one token a chunk
PROMPT_TOKENS, OUTPUT_TOKENS = 128, 32


def seed002_summary() -> pd.DataFrame:
    """A summary frame (exact SUMMARY_COLUMNS): a baseline row and the vLLM source's 5 stages."""
    base = seed002_baseline()  # the baseline stage's row agrees with the Baseline fixture
    rows = [dict.fromkeys(SUMMARY_COLUMNS, math.nan)]
    rows[0].update(
        stage=0, kind="baseline", target_users=1, batch_size=1, requests=21, ok=21, errors=0,
        success_pct=100.0, e2e_p50_ms=base.e2e_p50_ms, e2e_p95_ms=base.e2e_p95_ms,
        e2e_p99_ms=580.0, output_tok_s=base.output_tok_s, qps=2.0,
    )  # fmt: skip
    for i, (users, p50, p99, tok_s, mem, ok_pct, _) in enumerate(SEED_002_TABLE, start=1):
        row = dict.fromkeys(SUMMARY_COLUMNS, math.nan)
        row.update(
            stage=i,
            kind="step",
            target_users=users,
            batch_size=1,
            window_s=90.0,
            requests=400,
            ok=round(4 * ok_pct),
            errors=400 - round(4 * ok_pct),
            length_mismatch=0,
            success_pct=ok_pct,
            qps=tok_s / 256 if tok_s == tok_s else math.nan,
            output_tok_s=tok_s,
            total_tok_s=tok_s * 3,
            e2e_mean_ms=p50 * 1100,
            e2e_p50_ms=p50 * 1000,
            e2e_p95_ms=p99 * 900,
            e2e_p99_ms=p99 * 1000,
            ttft_p50_ms=40.0 * i,
            ttft_p95_ms=70.0 * i,
            itl_p50_ms=12.5,
            itl_p95_ms=20.0,
            gpu_mem_peak_pct=mem,
            gpu_util_mean_pct=50 + 10 * i,
            kv_cache_peak_pct=mem - 5,
            waiting_mean=max(0, i - 2) * 3.0,
            waiting_max=max(0, i - 2) * 6.0,
            s_per_1k_total_tokens=p50 / 0.768,
        )
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    for col in ("stage", "target_users"):
        frame[col] = frame[col].astype(int)
    return frame


def seed002_knee(*, untrusted_stage: int | None = None) -> KneeResult:
    stages = []
    for i, (users, _p50, p99, _, mem, ok_pct, verdict) in enumerate(SEED_002_TABLE, start=1):
        reasons: tuple[str, ...] = ()
        if verdict == "critical":
            reasons = ("memory 85 % reached the 85 % threshold",)
        elif verdict == "knee":
            reasons = (
                "marginal gain 0.07 of the single-user rate (threshold 0.15)",
                f"P99 e2e {p99:.1f} s is 9.0× the baseline's (threshold 2.0×)",
            )
        elif verdict == "red_line":
            reasons = (f"success {ok_pct:.0f} % < 100 %: errors | timeouts",)
        stages.append(
            StageVerdict(
                stage=i,
                target_users=users,
                verdict=verdict,  # type: ignore[arg-type]
                reasons=reasons,
                signals=(Signal("memory_pressure", mem >= 85, mem, 85.0, f"memory {mem} %"),),
                trusted=i != untrusted_stage,
                bottleneck="memory" if mem >= 95 else ("queueing" if i >= 3 else "none"),
                bottleneck_reason="memory ≥ 95 %" if mem >= 95 else "",
            )
        )
    level_users = [row[0] for row in SEED_002_TABLE]
    verdicts = [row[-1] for row in SEED_002_TABLE]
    knee, red_line = verdicts.index("knee") + 1, verdicts.index("red_line") + 1
    return KneeResult(
        stages=tuple(stages),
        knee_stage=knee,
        knee_users=level_users[knee - 1],
        red_line_stage=red_line,
        red_line_users=level_users[red_line - 1],
        max_concurrency=level_users[knee - 2],  # the stage before the knee
        base_capacity=level_users[knee - 2],
        summary="Knee at 32 users: throughput flattens while P99 departs from the baseline.",
        params={"marginal_gain_min": 0.15, "tail_ratio": 2.0, "sla_p99_ms": math.nan},
    )


def seed002_baseline() -> Baseline:
    return Baseline(
        source="baseline",
        requests=20,
        e2e_p50_ms=500.0,
        e2e_p95_ms=560.0,
        ttft_p50_ms=35.0,
        ttft_p95_ms=math.nan,
        s_per_1k_total_p50=0.65,
        s_per_1k_total_p95=0.73,
        s_per_1k_completion_p50=1.95,
        s_per_1k_completion_p95=None,
        output_tok_s=60.0,
        warnings=("P95/median 1.1× is fine",),
    )


def seed002_recs() -> Recommendations:
    return Recommendations(
        items=(
            Recommendation("max_concurrency", 24, "the stage before the knee (32 users)"),
            Recommendation("production_watermark", [16, 19], "70-80 % of base capacity 24"),
            Recommendation("queue_timeout_ms", 1680, "baseline P95 560 ms × 3"),
            Recommendation("vllm.max_num_seqs", 24, "queue rather than OOM"),
        ),
        server_flags=("--max-num-seqs 24", "--gpu-memory-utilization 0.85"),
    )


# --------------------------------------------------------------------------- run directory


def _write_csv(path: Path, columns: tuple[str, ...], rows: list[dict]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in row.items()})


def _lag_cells(
    lag_ms: Mapping[int, float] | None, users: int, host_load: tuple[float, int]
) -> dict[str, float | int | None]:
    """A client.csv row's lag columns: ``lag_ms[users]`` (its mean; the largest four times it)."""
    if lag_ms is None:
        return {}
    lag = lag_ms.get(users, 0.0)
    return dict(
        loop_lag_max_ms=lag * 4,
        loop_lag_mean_ms=lag,
        host_load_1m=host_load[0],
        host_cpus=host_load[1],
    )


def write_run_dir(
    root: Path,
    *,
    levels: tuple[int, ...] = (1, 2, 4, 8, 16),
    slots: int = 6,
    stage_s: float = 6.0,
    warmup_s: float = 1.0,
    cooldown_s: float = 1.0,
    run_info: dict | None = None,
    seed: int = 1,
    with_gpu: bool = True,
    with_server_metrics: bool = True,
    kv_full_pct: float = 90.0,
    client_lag_ms: Mapping[int, float] | None = None,
    host_load: tuple[float, int] = (1.0, 2),
    prefill_stalls: bool = False,
    tokens_per_chunk: int = 1,
) -> Path:
    """Write a small contract-shaped run directory from a closed-form server with ``slots`` slots.

    ``kv_full_pct``: the KV-cache usage its ``/metrics`` report with every slot busy (the demo's
    simulator: about 15 %, the slots bind long before memory).
    ``client_lag_ms``: users → the event-loop lag every client.csv row of that level reports
    (with ``host_load``: load, CPUs); None writes the lag columns empty, as runs before them.

    Latency is flat up to ``slots`` users and grows linearly past it (queueing), so throughput
    flattens after ``slots``: a knee the analysis should find between 8 and 16 users by default.
    Past the slots a request waits for one before its first token, as on a real server: the wait
    is in its TTFT (20 ms alone), and its tokens come at the rate of a full batch (its TPOT
    stays the one at ``slots``).

    ``prefill_stalls``: the server is one engine whose steps also run the prefills they admit, as
    the what-if model has it (:mod:`analysis.predict.batching`): each of the ``b`` running
    sequences' 12.6 ms prefill (the TTFT less one 7.4 ms step) lands in the batch once per 32
    steps, so a request's e2e grows by 12.6 ms per sequence beside it (0.25 s alone, as
    without). Off, the prefills cost the others nothing — a server the model cannot reproduce
    at 8 sequences or more (its in-sample check refuses to predict from it:
    :mod:`analysis.predict.insample`).

    ``tokens_per_chunk``: the stream carries that many tokens a chunk (vLLM's
    ``--stream-interval``, TGI, a gateway): ``chunks`` is the completion over it and each ITL
    column that many tokens' time; TTFT, TPOT and e2e stay the one-token-a-chunk server's.
    """
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    t0 = 1_760_000_000.0
    stages, requests, gpu, metrics, client = [], [], [], [], []
    t = t0
    all_levels = (("baseline", 1), *(("step", c) for c in levels))
    for index, (kind, users) in enumerate(all_levels):
        start, warm_end = t, t + (0.0 if kind == "baseline" else warmup_s)
        measure_end = t + stage_s
        end = measure_end + cooldown_s
        stages.append(
            dict(
                stage=index,
                kind=kind,
                target_users=users,
                batch_size=1,
                start_unix_s=start,
                warmup_end_unix_s=warm_end,
                measure_end_unix_s=measure_end,
                end_unix_s=end,
                stop_reason="duration",
            )
        )
        service_s = 0.25  # one request's time in a slot
        if prefill_stalls:
            service_s = OUTPUT_TOKENS * 0.0074 + 0.0126 * min(users, slots)
        e2e_s = service_s * max(1.0, users / slots)
        for user in range(users):
            now = start + rng.uniform(0, 0.05)
            seq = 0
            while now + e2e_s * 1.1 < measure_end:
                spread = rng.uniform(0.9, 1.1)
                e2e = e2e_s * spread
                ttft = 0.02 + (e2e_s - service_s) * spread  # alone, plus the wait for a slot
                phase = (
                    "baseline"
                    if kind == "baseline"
                    else ("warmup" if now < warm_end else "measure")
                )
                seq += 1
                requests.append(
                    dict(
                        request_id=f"local-{index}-{user}-{seq}",
                        stage=index,
                        phase=phase,
                        worker="local",
                        user_id=user,
                        endpoint="chat",
                        stream=1,
                        batch_size=1,
                        start_unix_s=now,
                        end_unix_s=now + e2e,
                        e2e_ms=e2e * 1000,
                        ttft_ms=ttft * 1000,
                        tpot_ms=(e2e - ttft) * 1000 / (OUTPUT_TOKENS - 1),
                        itl_mean_ms=7.5 * tokens_per_chunk,
                        itl_p50_ms=7.4 * tokens_per_chunk,
                        itl_p95_ms=9.0 * tokens_per_chunk,
                        itl_max_ms=12.0 * tokens_per_chunk,
                        chunks=OUTPUT_TOKENS // tokens_per_chunk,
                        prompt_tokens=PROMPT_TOKENS,
                        completion_tokens=OUTPUT_TOKENS,
                        usage_source="server",
                        target_input_tokens=PROMPT_TOKENS,
                        target_output_tokens=OUTPUT_TOKENS,
                        length_ok=1,
                        outcome="ok",
                        http_status=200,
                        error="",
                        prompt_hash="abc123",
                    )
                )
                now += e2e
        ts = start
        while ts < end:
            busy = ts < measure_end
            running = min(users, slots) if busy else 0
            waiting = max(0, users - slots) if busy else 0
            if with_gpu:
                gpu.append(
                    dict(
                        timestamp_unix_s=ts,
                        gpu_index=0,
                        source="sim",
                        memory_used_mib=40000 + 2000 * running,
                        memory_total_mib=81920,
                        gpu_util_pct=min(100, 15 * running),
                        sm_util_pct=None,
                        mem_bw_util_pct=None,
                        error="",
                    )
                )
            if with_server_metrics:
                for metric, value in (
                    ("vllm:num_requests_running", running),
                    ("vllm:num_requests_waiting", waiting),
                    ("vllm:kv_cache_usage_perc", running / slots * kv_full_pct / 100),
                    ("vllm:num_preemptions_total", 0),
                ):
                    metrics.append(
                        dict(
                            timestamp_unix_s=ts,
                            endpoint="http://127.0.0.1:1/metrics",
                            metric=metric,
                            labels='model_name="sim"',
                            value=value,
                            error="",
                        )
                    )
            client.append(
                dict(
                    timestamp_unix_s=ts,
                    worker="local",
                    cpu_pct=5 + users,
                    memory_mib=80,
                    users=users if busy else 0,
                    **_lag_cells(client_lag_ms, users, host_load),
                )
            )
            ts += 0.5
        t = end
    _write_csv(root / contract.STAGES_CSV, contract.STAGE_COLUMNS, stages)
    _write_csv(root / contract.REQUESTS_CSV, contract.REQUEST_COLUMNS, requests)
    if with_gpu:
        _write_csv(root / contract.GPU_CSV, contract.GPU_COLUMNS, gpu)
    if with_server_metrics:
        _write_csv(root / contract.SERVER_METRICS_CSV, contract.SERVER_METRIC_COLUMNS, metrics)
    _write_csv(root / contract.CLIENT_CSV, contract.CLIENT_COLUMNS, client)
    info = {
        "run_id": root.name,
        "start_unix_s": t0,
        "target": {"host": "http://127.0.0.1:1", "model": "sim"},
        "levels": list(levels),
        "options": {"llm_api_key_env": "OPENAI_API_KEY", "llm_batch_size": 1},
        "api_key": SECRET,
        "prompt_source": {
            "kind": "fixed",
            "input_tokens": PROMPT_TOKENS,
            "output_tokens": OUTPUT_TOKENS,
        },
    }
    info.update(run_info or {})
    (root / contract.RUN_JSON).write_text(json.dumps(info, indent=2))
    return root


@pytest.fixture(autouse=True)
def no_global_figures():
    """Close any pyplot figure after each test, and fail if library code made one.

    Import this name into a test module to switch it on there (pytest finds imported fixtures).
    """
    import matplotlib.pyplot as plt

    before = set(plt.get_fignums())
    yield
    leaked = set(plt.get_fignums()) - before
    plt.close("all")
    assert not leaked, f"library code created pyplot figures {leaked}: use Figure objects"


def canonical_server_timeline(server_metrics: pd.DataFrame) -> pd.DataFrame:
    """The canonical timeline (kv %, running, waiting, preemptions) from the vLLM names above.

    A stand-in with helper D's column names, so the plot tests do not depend on D's parser.
    """
    names = {
        "vllm:kv_cache_usage_perc": "kv_cache_usage_pct",
        "vllm:num_requests_running": "requests_running",
        "vllm:num_requests_waiting": "requests_waiting",
        "vllm:num_preemptions_total": "preemptions_total",
    }
    wide = server_metrics.pivot_table(
        index=["timestamp_unix_s", "endpoint"], columns="metric", values="value"
    ).reset_index()
    wide = wide.rename(columns=names)
    wide["kv_cache_usage_pct"] = wide["kv_cache_usage_pct"] * 100.0
    return wide
