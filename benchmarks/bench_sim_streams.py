"""Can ``loadknee sim`` hold many concurrent streams without its own CPU becoming the knee?

Drives the simulator with a plain aiohttp closed-loop client (no Locust) at 1/16/64/128
streams, a few seconds each, and prints side by side: measured output tokens/s, the saturation
model's expected tokens/s, their ratio, and the simulator process's CPU % (psutil; 100 = one
core), plus the engine loop's own health from ``/sim/stats``: the share of steps it woke more
than 5 ms late and its mean wake-up lag. Two configurations by default: ``fast`` (the test
preset: 8 slots, so extra streams queue) and ``wide`` (``gpu-like`` with 128 slots and a large
KV cache, so all 128 streams are decoding at once — the hardest case for the simulator's event
loop). A ratio near 1 with CPU well under 100 % means the simulator, not its host, sets the pace.

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
from loadknee_locust.sim.saturation import expected_throughput, saturation_concurrency
from tests.support.sim_probe import closed_loop

CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "fast": ("fast", {}),
    "wide": ("gpu-like", {"max_num_seqs": 128, "kv_cache_tokens": 65536}),
}

COLUMNS = (("streams", 7), ("measured tok/s", 15), ("expected tok/s", 15), ("ratio", 6),
           ("sim CPU %", 9), ("client CPU %", 12), ("failed", 6), ("late steps", 10),
           ("lag ms", 6))  # fmt: skip


def run_config(name: str, levels: list[int], seconds: float, io: tuple[int, int]) -> None:
    preset_name, overrides = CONFIGS[name]
    params = preset(preset_name, **overrides)
    c_star = saturation_concurrency(params, *io)
    print(f"\n{name}: preset {preset_name} {overrides or ''}  in/out {io[0]}/{io[1]} tokens, "
          f"c* = {c_star:g}")  # fmt: skip
    print(" ".join(f"{title:>{width}}" for title, width in COLUMNS))
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

            before = sim.stats()["engine_loop"]
            result, sim_cpu, client_cpu = asyncio.run(measured())
            after = sim.stats()["engine_loop"]
            steps = after["steps"] - before["steps"]
            late = (after["late_steps"] - before["late_steps"]) / steps if steps else 0.0
            lag = after["lag_mean_ms"] * after["steps"] - before["lag_mean_ms"] * before["steps"]
            expected = expected_throughput(params, level, *io)
            cells = (
                f"{level}", f"{result.tokens_per_s:.0f}", f"{expected:.0f}",
                f"{result.tokens_per_s / expected:.3f}", f"{sim_cpu:.1f}", f"{client_cpu:.1f}",
                f"{result.requests_failed}", f"{late:.1%}", f"{lag / max(steps, 1):.2f}",
            )  # fmt: skip
            print(
                " ".join(
                    f"{cell:>{width}}" for cell, (_, width) in zip(cells, COLUMNS, strict=True)
                )
            )


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
