"""Client CPU per streamed token and TTFT error: loadknee's ChatUser vs a plain aiohttp client.

One run, one simulated server (``loadknee sim``: ``--streams`` slots, ``--ms-per-token`` per
decode step, so every stream gets a token every few ms), two clients one after the other, each
in its own process with ``--streams`` concurrent closed-loop streams for ``--seconds``:

1. loadknee's ``ChatUser`` under Locust (all features on: calibration, unique tags, SSE parser,
   ITL summary, one event per request with its row);
2. a plain asyncio + aiohttp client (line reads, ``json.loads`` per chunk, first-content stamp).

The clients alternate for ``--rounds`` rounds (A B A B …) so that both meet the same machine
noise; each round prints its own line and the summary uses the per-client medians. Each client
process measures its own CPU time (``time.process_time``) over the load window
only (start-up and imports excluded) and reports tokens, requests and per-request TTFT by
request id; TTFT error = client TTFT − the server's own (``/sim/log``: first content written −
arrival). Printed side by side, with the ratio (goal ≤ 1.0).

Run: ``.venv/bin/python benchmarks/bench_client_cpu.py [--streams 64] [--seconds 15]``.
This file is also the locustfile of step 1 (Locust imports it; the classes below exist only then).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


# -- step 1: the locustfile side -----------------------------------------------------------
if __name__ != "__main__" and os.environ.get("LK_BENCH_OUT"):
    from locust import events

    from loadknee_locust.client.users import ChatUser
    from loadknee_locust.plugin import options

    _bench: dict[str, Any] = {"tokens": 0, "requests": 0, "ttft": {}, "cpu0": None}

    @events.init_command_line_parser.add_listener
    def _options(parser: Any, **_kw: Any) -> None:
        options.add_arguments(parser)

    @events.spawning_complete.add_listener
    def _window_opens(**_kw: Any) -> None:
        _bench["cpu0"], _bench["t0"] = time.process_time(), time.perf_counter()

    @events.request.add_listener
    def _count(context: dict, **_kw: Any) -> None:
        row = context.get("loadknee") or {}
        if _bench["cpu0"] is not None and row.get("outcome") == "ok":
            _bench["tokens"] += row["completion_tokens"] or 0
            _bench["requests"] += 1
            _bench["ttft"][row["request_id"]] = row["ttft_ms"]

    @events.test_stop.add_listener
    def _window_closes(**_kw: Any) -> None:
        if _bench["cpu0"] is None or "cpu" in _bench:
            return
        _bench["cpu"] = time.process_time() - _bench["cpu0"]
        _bench["wall"] = time.perf_counter() - _bench["t0"]
        out = {k: _bench[k] for k in ("tokens", "requests", "ttft", "cpu", "wall")}
        Path(os.environ["LK_BENCH_OUT"]).write_text(json.dumps(out))

    class BenchChat(ChatUser):
        pass


# -- step 2: the plain aiohttp client ------------------------------------------------------
async def _aiohttp_client(url: str, streams: int, seconds: float, body: dict) -> dict:
    import aiohttp

    tokens = requests = 0
    ttft: dict[str, float] = {}
    stop_at = 0.0

    async def one_stream(session: aiohttp.ClientSession) -> None:
        nonlocal tokens, requests
        while time.perf_counter() < stop_at:
            rid = uuid.uuid4().hex[:16]
            t0 = time.perf_counter()
            first = None
            usage = None
            headers = {"X-Request-Id": rid, "Accept-Encoding": "identity"}
            async with session.post(url, json=body, headers=headers) as resp:
                async for line in resp.content:
                    if not line.startswith(b"data: "):
                        continue
                    payload = line[6:].strip()
                    if payload == b"[DONE]":
                        break
                    chunk = json.loads(payload)
                    if chunk.get("usage"):
                        usage = chunk["usage"]
                    choices = chunk.get("choices") or []
                    if first is None and any(c.get("delta", {}).get("content") for c in choices):
                        first = time.perf_counter()
            if first is not None and usage:
                tokens += usage["completion_tokens"]
                requests += 1
                ttft[rid] = (first - t0) * 1000

    connector = aiohttp.TCPConnector(limit=streams)
    async with aiohttp.ClientSession(connector=connector) as session:
        stop_at = time.perf_counter() + seconds
        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one_stream(session) for _ in range(streams)))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    return {"tokens": tokens, "requests": requests, "ttft": ttft, "cpu": cpu, "wall": wall}


# -- the driver ----------------------------------------------------------------------------
def _run_locust(url: str, streams: int, seconds: int, out: Path, tokens_out: int) -> dict:
    argv = [
        sys.executable, "-m", "locust", "-f", str(HERE), "--headless", "-u", str(streams),
        "-r", str(streams), "-t", f"{seconds}s", "--stop-timeout", "30", "-H", url,
        "--only-summary", "--llm-output-tokens", str(tokens_out), "--llm-input-tokens", "128",
    ]  # fmt: skip
    env = {**os.environ, "LK_BENCH_OUT": str(out)}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=seconds + 120)
    if not out.exists():
        raise SystemExit(f"locust run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return dict(json.loads(out.read_text()))


def _run_aiohttp(url: str, streams: int, seconds: int, out: Path, tokens_out: int) -> dict:
    argv = [
        sys.executable, str(HERE), "--aiohttp-client", url, "--streams", str(streams),
        "--seconds", str(seconds), "--out", str(out), "--output-tokens", str(tokens_out),
    ]  # fmt: skip
    subprocess.run(argv, check=True, timeout=seconds + 120)
    return dict(json.loads(out.read_text()))


def _ttft_error(result: dict, server: dict[str, dict]) -> tuple[float, float, int]:
    diffs = []
    for rid, ttft in result["ttft"].items():
        rec = server.get(rid)
        if rec and rec.get("first_token_unix_s") and ttft is not None:
            diffs.append(ttft - (rec["first_token_unix_s"] - rec["arrival_unix_s"]) * 1000)
    if not diffs:
        return float("nan"), float("nan"), 0
    return statistics.median(diffs), sorted(diffs)[int(0.95 * (len(diffs) - 1))], len(diffs)


def _print_results(
    args: argparse.Namespace, names: list[str], results: list[tuple[str, dict]], server: dict
) -> None:
    """One line per client and round, then the medians the goal is judged by."""
    print(
        f"{args.streams} streams, {args.ms_per_token} ms/token, {args.output_tokens} tokens "
        f"per request, {args.seconds} s per client, same simulator"
    )
    head = (
        f"{'client':<20}{'requests':>9}{'tokens':>9}{'CPU s':>8}{'µs/token':>10}"
        f"{'µs/request':>12}{'TTFT err med ms':>17}{'p95 ms':>8}"
    )
    print(head)
    per_token: dict[str, list[float]] = {name: [] for name in names}
    ttft_err: dict[str, list[float]] = {name: [] for name in names}
    for name, r in results:
        us_tok = r["cpu"] / r["tokens"] * 1e6 if r["tokens"] else float("nan")
        us_req = r["cpu"] / r["requests"] * 1e6 if r["requests"] else float("nan")
        med, p95, _ = _ttft_error(r, server)
        per_token[name].append(us_tok)
        ttft_err[name].append(med)
        print(
            f"{name:<20}{r['requests']:>9}{r['tokens']:>9}{r['cpu']:>8.2f}{us_tok:>10.1f}"
            f"{us_req:>12.0f}{med:>17.2f}{p95:>8.2f}"
        )
    ours = statistics.median(per_token["loadknee ChatUser"])
    plain = statistics.median(per_token["aiohttp"])
    print(
        f"medians over {args.rounds} rounds: {ours:.1f} vs {plain:.1f} µs/token; "
        f"TTFT error {statistics.median(ttft_err['loadknee ChatUser']):.2f} vs "
        f"{statistics.median(ttft_err['aiohttp']):.2f} ms"
    )
    print(f"CPU per token, loadknee / aiohttp: {ours / plain:.2f} (goal ≤ 1.0)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--ms-per-token", type=float, default=5.0)
    ap.add_argument("--output-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--aiohttp-client", metavar="URL", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.aiohttp_client:  # child mode
        body = {
            "model": "sim-llm",
            "messages": [{"role": "user", "content": "the sun was warm " * 30}],
            "max_tokens": args.output_tokens,
            "min_tokens": args.output_tokens,
            "ignore_eos": True,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        url = args.aiohttp_client + "/v1/chat/completions"
        result = asyncio.run(_aiohttp_client(url, args.streams, args.seconds, body))
        Path(args.out).write_text(json.dumps(result))
        return 0

    sys.path.insert(0, str(HERE.parent.parent))
    from loadknee_locust.sim.launch import SimProcess

    sim_args = dict(
        max_num_seqs=args.streams, decode_base_ms=args.ms_per_token, decode_per_seq_ms=0.0,
        prefill_ms_per_token=0.0, kv_cache_tokens=max(65536, args.streams * 1024),
        max_waiting=100_000,
    )  # fmt: skip
    clients = (("loadknee ChatUser", _run_locust), ("aiohttp", _run_aiohttp))
    results: list[tuple[str, dict]] = []
    with tempfile.TemporaryDirectory() as tmp, SimProcess.start("fast", **sim_args) as sim:
        for _ in range(args.rounds):
            for name, run in clients:
                out = Path(tmp) / f"{len(results)}.json"
                results.append(
                    (name, run(sim.url, args.streams, args.seconds, out, args.output_tokens))
                )
        server = {r["request_id"]: r for r in sim.log()}

    _print_results(args, [name for name, _ in clients], results, server)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
