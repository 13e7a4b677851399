"""How many concurrent streams one load-generator process holds before it is the bottleneck.

One Locust process (a worker and a local runner are the same single-core gevent loop) runs the
packaged ``ChatUser`` against ``loadknee sim`` with a slot for every user and a fixed decode step
(``--ms-per-token``, 20 ms ≈ 50 tokens/s per stream, a typical vLLM ITL), so the server never
saturates and only the client can: a stepped sweep over ``--levels``, then ``loadknee analyze``'s
own judgement per stage. The answer is the highest level before the report's client signal fires
(load-generator CPU peak ≥ ``--client-cpu-limit``, 90 % of a core), and, for the sizing rule,
the CPU-per-stream slope: streams per core = the limit ÷ the CPU % one stream costs. Output
tokens/s against the ideal (users × 1000 / ms-per-token) show where the client starts to lag.

Run: ``.venv/bin/python benchmarks/bench_streams_per_worker.py [--levels 16,32,64,96,128,192]``
(about 2 minutes). The numbers depend on the machine and its other load: quote them with it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from analysis.pipeline import analyze_run
from loadknee_locust.sim.launch import SimProcess
from loadknee_locust.sweep.schedule import parse_levels


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--levels", default="16,32,64,96,128,192")
    p.add_argument("--stage-seconds", type=float, default=12.0)
    p.add_argument("--ms-per-token", type=float, default=20.0)
    p.add_argument("--input-tokens", type=int, default=128)
    p.add_argument("--output-tokens", type=int, default=64)
    args = p.parse_args()
    levels = parse_levels(args.levels)
    top = max(levels)
    per_seq = args.input_tokens + args.output_tokens + 64
    sim_params = {
        "max_num_seqs": top,
        "max_num_batched_tokens": max(2048, top * 2),
        "kv_cache_tokens": max(16384, top * per_seq),
        "decode_base_ms": args.ms_per_token,
        "decode_per_seq_ms": 0.0,
        "prefill_ms_per_token": 0.0,
    }
    with tempfile.TemporaryDirectory() as tmp, SimProcess.start("fast", **sim_params) as sim:
        out = Path(tmp)
        cmd = [
            sys.executable, "-m", "loadknee_locust", "run", "--host", sim.url,
            "--levels", args.levels, "--stage-seconds", str(args.stage_seconds),
            "--warmup-seconds", "3", "--cooldown-seconds", "1", "--baseline-requests", "0",
            "--input-tokens", str(args.input_tokens), "--output-tokens", str(args.output_tokens),
            "--out", str(out), "--run-id", "bench",
        ]  # fmt: skip
        server = psutil.Process(sim.proc.pid)
        cpu0, t0 = server.cpu_times(), time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        cpu1, wall = server.cpu_times(), time.perf_counter() - t0
        sim_cpu_pct = 100.0 * (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / wall
        analysis = analyze_run(out / "bench")
    fired: dict[int, bool] = {}
    cpu: dict[int, float] = {}
    for verdict in analysis.knee.stages:
        for sig in verdict.signals:
            if sig.name == "client_bound":
                fired[verdict.target_users] = bool(sig.fired)
                if sig.value is not None:
                    cpu[verdict.target_users] = float(sig.value)
    summary = analysis.summary
    rows = summary[summary["kind"] == "step"].set_index("target_users")
    print(f"simulator CPU over the run: {sim_cpu_pct:.0f} % of a core (it shares the machine)")
    print(f"ms per token {args.ms_per_token:g} (ideal {1000 / args.ms_per_token:g} tok/s/stream)")
    print(" users  client CPU peak %  out tok/s  of ideal  CPU % per 1k tok/s  client-bound")
    delivered: dict[int, float] = {}
    per_ktok: list[float] = []
    for users in levels:
        tok = float(rows.loc[users, "output_tok_s"])
        delivered[users] = tok / (users * 1000.0 / args.ms_per_token)
        load = cpu.get(users, float("nan"))
        if tok > 0 and load > 0:
            per_ktok.append(1000.0 * load / tok)
        print(
            f"{users:6d}  {load:17.1f}  {tok:9.0f}  {delivered[users]:8.2f}"
            f"  {1000.0 * load / tok if tok else float('nan'):18.2f}"
            f"  {'YES' if fired.get(users) else 'no'}"
        )
    held = [u for u in levels if not fired.get(u)]
    first_bound = next((u for u in levels if fired.get(u)), None)
    kept_up = [u for u in levels if delivered[u] >= 0.9 and not fired.get(u)]
    print(
        f"client signal: held up to {max(held) if held else 0} streams, first client-bound level "
        f"{first_bound}; delivered >= 90 % of the ideal token rate up to "
        f"{max(kept_up) if kept_up else 0} streams"
    )
    if per_ktok:
        worst = max(per_ktok)  # the costliest stage: the conservative slope
        streams = 90.0 / worst * 1000.0 / (1000.0 / args.ms_per_token)
        print(
            f"CPU cost: up to {worst:.2f} % of a core per 1k tok/s → the client signal (90 %) at "
            f"about {streams:.0f} streams of {1000 / args.ms_per_token:g} tok/s per worker core"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
