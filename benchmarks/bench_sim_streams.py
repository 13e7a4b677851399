"""Can ``loadknee sim`` hold many concurrent streams without its own CPU becoming the knee?

Drives the simulator with a plain aiohttp closed-loop client (no Locust) at 1/16/64/128
streams, a few seconds each, and prints side by side: measured output tokens/s, the saturation
model's expected tokens/s, their ratio, and the simulator process's CPU % (psutil; 100 = one
core). Two configurations by default: ``fast`` (the test preset: 8 slots, so extra streams
queue) and ``wide`` (``gpu-like`` with 128 slots and a large KV cache, so all 128 streams are
decoding at once — the hardest case for the simulator's event loop). A ratio near 1 with CPU
well under 100 % means the simulator, not its host, sets the pace.

Identical closed-loop requests stay in step (they start, prefill and finish together), so the
window should span a few request lifetimes; short outputs (32 tokens by default) make that cheap.

    .venv/bin/python benchmarks/bench_sim_streams.py [--seconds 3] [--levels 1,16,64,128]
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import psutil

from loadknee_locust.sim.launch import SimProcess
from loadknee_locust.sim.params import preset
from loadknee_locust.sim.probe import closed_loop
from loadknee_locust.sim.saturation import expected_throughput, saturation_concurrency

CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "fast": ("fast", {}),
    "wide": ("gpu-like", {"max_num_seqs": 128, "kv_cache_tokens": 65536}),
}


def run_config(name: str, levels: list[int], seconds: float, io: tuple[int, int]) -> None:
    preset_name, overrides = CONFIGS[name]
    params = preset(preset_name, **overrides)
    c_star = saturation_concurrency(params, *io)
    print(f"\n{name}: preset {preset_name} {overrides or ''}  in/out {io[0]}/{io[1]} tokens, "
          f"c* = {c_star:g}")  # fmt: skip
    print(f"{'streams':>7} {'measured tok/s':>15} {'expected tok/s':>15} {'ratio':>6} "
          f"{'sim CPU %':>9} {'client CPU %':>12} {'failed':>6}")  # fmt: skip
    client = psutil.Process()
    with SimProcess.start(preset_name, **overrides) as sim:
        server = psutil.Process(sim.proc.pid)
        for level in levels:
            # warm-up outside the CPU window, then measure CPU over the measured window only
            loop = closed_loop(sim.url, concurrency=level, input_tokens=io[0],
                               output_tokens=io[1], warmup_s=1.0, window_s=seconds)  # fmt: skip

            async def measured(loop: Any = loop) -> tuple[Any, float, float]:
                task = asyncio.create_task(loop)
                await asyncio.sleep(1.0)
                server.cpu_percent()
                client.cpu_percent()
                result = await task
                return result, server.cpu_percent(), client.cpu_percent()

            result, sim_cpu, client_cpu = asyncio.run(measured())
            expected = expected_throughput(params, level, *io)
            print(f"{level:>7} {result.tokens_per_s:>15.0f} {expected:>15.0f} "
                  f"{result.tokens_per_s / expected:>6.3f} {sim_cpu:>9.1f} {client_cpu:>12.1f} "
                  f"{result.requests_failed:>6}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured window per level")
    parser.add_argument("--levels", default="1,16,64,128", help="concurrent streams per level")
    parser.add_argument("--configs", default="fast,wide", help="which of: " + ",".join(CONFIGS))
    parser.add_argument("--input-tokens", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=32)
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    print(f"host: {psutil.cpu_count()} CPUs; each level: 1 s warm-up + {args.seconds:g} s window")
    for name in args.configs.split(","):
        run_config(name, levels, args.seconds, (args.input_tokens, args.output_tokens))


if __name__ == "__main__":
    main()
