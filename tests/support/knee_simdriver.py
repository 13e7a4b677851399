"""Test helper: drive ``loadknee sim`` through stepped closed-loop concurrency, write a run dir.

A stand-in for the Locust pipeline, small enough to trust: ``levels`` stages of ``users`` aiohttp
tasks, each sending non-streaming ``/v1/completions`` requests back to back (no think time) for
``warmup_s + measure_s`` (with ``stream``, streamed: TTFT and inter-token gaps stamped as each
chunk is read); requests that start in the warm-up are phase ``warmup``, the rest
``measure``; no new request starts after the window closes and the stage waits for those in
flight. A sequential baseline stage (one warm-up request, then ``baseline_requests``) comes
first. ``/metrics`` is scraped every ``scrape_s`` into ``server_metrics.csv`` (the sim's DCGM
gauges stand in for ``gpu.csv``). Everything is bounded: each request has a timeout and the run
ends by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from tests.support.knee_rundir import write_run


@dataclass(frozen=True, kw_only=True)
class DriveSpec:
    """What to drive: by keyword only, as a row of unnamed numbers is easy to misread."""

    # each request
    input_tokens: int = 64
    output_tokens: int = 24
    stream: bool = False
    request_timeout_s: float = 20.0
    # the sweep: a baseline stage, then each level's warm-up, measured window and cool-down
    levels: tuple[int, ...]
    baseline_requests: int = 8
    warmup_s: float = 0.5
    measure_s: float = 1.8
    cooldown_s: float = 0.2
    # the /metrics scrape
    scrape_s: float = 0.25


def _prompt(tokens: int) -> str:
    # the sim's tokenizer counts words and punctuation; "w" repeated gives one token per word
    return " ".join(["w"] * tokens)


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))


class _Driver:
    def __init__(self, url: str, spec: DriveSpec) -> None:
        self.url = url
        self.spec = spec
        self.requests: list[dict[str, Any]] = []
        self.stages: list[dict[str, Any]] = []
        self.metrics: list[dict[str, Any]] = []
        self.ids = itertools.count()
        self.body = {
            "model": "sim-llm",
            "prompt": _prompt(spec.input_tokens),
            "max_tokens": spec.output_tokens,
            "ignore_eos": True,
            "stream": spec.stream,
        }
        if spec.stream:
            self.body["stream_options"] = {"include_usage": True}

    async def one(self, session: aiohttp.ClientSession, stage: int, user: int, phase: str) -> None:
        n = next(self.ids)
        start = time.time()
        row: dict[str, Any] = {
            "request_id": f"local-{n}", "stage": stage, "phase": phase, "worker": "local",
            "user_id": user, "endpoint": "completions", "stream": int(self.spec.stream),
            "batch_size": 1,
            "start_unix_s": start, "target_input_tokens": self.spec.input_tokens,
            "target_output_tokens": self.spec.output_tokens,
        }  # fmt: skip
        try:
            async with session.post(self.url + "/v1/completions", json=self.body) as resp:
                if self.spec.stream and resp.status == 200:
                    usage = await self._read_stream(resp, start, row)
                    payload = b""
                else:
                    payload = await resp.read()
                    usage = None
                row["http_status"] = resp.status
                if resp.status == 200:
                    if usage is None:
                        usage = (await resp.json(content_type=None)).get("usage", {})
                    row["prompt_tokens"] = usage.get("prompt_tokens")
                    row["completion_tokens"] = usage.get("completion_tokens")
                    row["usage_source"] = "server"
                    ok = row["completion_tokens"] == self.spec.output_tokens
                    row["length_ok"] = ok
                    row["outcome"] = "ok" if ok else "length_mismatch"
                else:
                    row["outcome"] = "http_error"
                    row["error"] = payload[:80].decode(errors="replace")
        except TimeoutError:
            row["outcome"], row["error"] = "timeout", "request timed out"
        except aiohttp.ClientError as exc:
            row["outcome"], row["error"] = "connect_error", type(exc).__name__
        end = time.time()
        row["end_unix_s"] = end
        row["e2e_ms"] = (end - start) * 1000.0
        self.requests.append(row)

    @staticmethod
    async def _read_stream(
        resp: aiohttp.ClientResponse, start: float, row: dict[str, Any]
    ) -> dict[str, Any]:
        """Stamp each content chunk as it is read: TTFT, inter-token gaps; returns the usage."""
        stamps: list[float] = []
        usage: dict[str, Any] = {}
        async for raw in resp.content:
            line = raw.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            if chunk.get("choices"):
                if chunk["choices"][0].get("text"):
                    stamps.append(time.time())
            elif chunk.get("usage"):
                usage = chunk["usage"]
        if stamps:
            row["ttft_ms"] = (stamps[0] - start) * 1000.0
            row["chunks"] = len(stamps)
        gaps = [(b - a) * 1000.0 for a, b in itertools.pairwise(stamps)]
        if gaps:
            row["itl_mean_ms"] = statistics.fmean(gaps)
            row["itl_p50_ms"] = statistics.median(gaps)
            ordered = sorted(gaps)
            row["itl_p95_ms"] = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
            row["itl_max_ms"] = ordered[-1]
            row["tpot_ms"] = (stamps[-1] - stamps[0]) * 1000.0 / len(gaps)
        return usage

    async def user_loop(
        self, session: aiohttp.ClientSession, stage: int, user: int, warm_end: float, end: float
    ) -> None:
        while (now := time.time()) < end:
            await self.one(session, stage, user, "warmup" if now < warm_end else "measure")
            if self.requests[-1]["outcome"] != "ok":
                await asyncio.sleep(0.05)  # a refused connection returns at once: don't spin

    async def baseline(self, session: aiohttp.ClientSession) -> None:
        start = time.time()
        await self.one(session, 0, 0, "warmup")
        warm_end = time.time()
        for _ in range(self.spec.baseline_requests):
            await self.one(session, 0, 0, "baseline")
        measure_end = time.time()
        await asyncio.sleep(self.spec.cooldown_s)
        self.stages.append(self._stage(0, "baseline", 1, start, warm_end, measure_end))

    def _stage(
        self, stage: int, kind: str, users: int, start: float, warm_end: float, measure_end: float
    ) -> dict[str, Any]:
        return {
            "stage": stage, "kind": kind, "target_users": users, "batch_size": 1,
            "start_unix_s": start, "warmup_end_unix_s": warm_end,
            "measure_end_unix_s": measure_end, "end_unix_s": time.time(),
            "stop_reason": "request_count" if kind == "baseline" else "duration",
        }  # fmt: skip

    async def step(self, session: aiohttp.ClientSession, stage: int, users: int) -> None:
        start = time.time()
        warm_end, end = start + self.spec.warmup_s, start + self.spec.warmup_s + self.spec.measure_s
        tasks = [self.user_loop(session, stage, u, warm_end, end) for u in range(users)]
        await asyncio.gather(*tasks)
        await asyncio.sleep(self.spec.cooldown_s)
        self.stages.append(self._stage(stage, "step", users, start, warm_end, end))

    async def scrape(self, session: aiohttp.ClientSession, stop: asyncio.Event) -> None:
        while not stop.is_set():
            stamp = time.time()
            try:
                async with session.get(self.url + "/metrics") as resp:
                    text = await resp.text()
                for family in text_string_to_metric_families(text):
                    for sample in family.samples:
                        self.metrics.append({
                            "timestamp_unix_s": stamp, "endpoint": self.url + "/metrics",
                            "metric": sample.name, "labels": _labels(sample.labels),
                            "value": sample.value,
                        })  # fmt: skip
            except (aiohttp.ClientError, TimeoutError) as exc:
                self.metrics.append({"timestamp_unix_s": stamp, "endpoint": self.url + "/metrics",
                                     "error": type(exc).__name__})  # fmt: skip
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.spec.scrape_s)

    async def run(self) -> None:
        timeout = aiohttp.ClientTimeout(total=self.spec.request_timeout_s)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            stop = asyncio.Event()
            scraper = asyncio.create_task(self.scrape(session, stop))
            try:
                await self.baseline(session)
                for index, users in enumerate(self.spec.levels, start=1):
                    await self.step(session, index, users)
            finally:
                stop.set()
                await scraper


def drive_sim(url: str, spec: DriveSpec, run_dir: Path, **run_info: Any) -> Path:
    """Run the stepped sweep against the sim at ``url`` and write ``run_dir``."""
    driver = _Driver(url, spec)
    asyncio.run(driver.run())
    info = {"run_id": run_dir.name, "levels": list(spec.levels), **run_info}
    return write_run(
        run_dir,
        stages=driver.stages,
        requests=sorted(driver.requests, key=lambda r: r["start_unix_s"]),
        server_metrics=driver.metrics,
        run_info=info,
    )
