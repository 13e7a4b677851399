"""The asyncio engine without HTTP: pacing, delivery, EOS, queue limit, abort, crash and OOM."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from loadknee_locust.sim.engine import (
    Engine,
    GenerationSpec,
    QueueFull,
    Request,
    Unavailable,
    stop_point,
)
from loadknee_locust.sim.params import SimParams, preset
from loadknee_locust.sim.telemetry import would_oom


def run_with_engine(params: SimParams, body: Callable[[Engine], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        engine = Engine(params)
        task = asyncio.create_task(engine.run())
        try:
            return await asyncio.wait_for(body(engine), timeout=20)
        finally:
            task.cancel()

    return asyncio.run(main())


async def drain(request: Request) -> list[tuple[int, str, str | None]]:
    events = []
    while not request.drained and not request.cut:
        events += [(e.index, e.text, e.finish_reason) for e in await request.next_events()]
    return events


def test_tokens_are_paced_and_delivered() -> None:
    params = preset("fast", decode_base_ms=5.0, decode_per_seq_ms=0.0, prefill_ms_per_token=0.0)

    async def body(engine: Engine) -> tuple[float, list[Any], Request]:
        start = time.monotonic()
        request = engine.submit(GenerationSpec((10, 20), max_tokens=20, ignore_eos=True))
        events = await drain(request)
        return time.monotonic() - start, events, request

    elapsed, events, request = run_with_engine(params, body)
    assert elapsed >= 20 * 0.005 * 0.95  # never faster than the model's 20 steps
    assert sorted(i for i, _, _ in events) == [0] * 20 + [1] * 20
    assert [r for _, _, r in events if r] == ["length", "length"]
    assert request.prompt_tokens == 30 and request.completion_tokens == 40
    assert request.first_token_unix_s is not None


def test_same_seed_same_text_and_lengths() -> None:
    params = preset("fast", decode_base_ms=1.0, eos_mean_tokens=10.0, seed=7)

    async def body(engine: Engine) -> list[list[Any]]:
        requests = [engine.submit(GenerationSpec((5,), max_tokens=60)) for _ in range(6)]
        return [await drain(r) for r in requests]

    first, second = run_with_engine(params, body), run_with_engine(params, body)
    assert first == second
    assert len({len(events) for events in first}) > 1  # EOS makes lengths vary
    other = run_with_engine(params.replace(seed=8), body)
    assert other != first


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (GenerationSpec((1,), max_tokens=50, ignore_eos=True), (50, "length")),
        (GenerationSpec((1,), max_tokens=1), None),
        (GenerationSpec((1,), max_tokens=500, min_tokens=499), (499, None)),
    ],
)
def test_stop_point(spec: GenerationSpec, expected: Any) -> None:
    params = preset("fast", eos_mean_tokens=20.0)
    stops = [stop_point(params, i, spec) for i in range(200)]
    if expected is None:
        assert all(stop == (1, "length") or stop == (1, "stop") for stop in stops)
    elif expected[1] is None:
        assert min(s for s, _ in stops) >= expected[0]
    else:
        assert set(stops) == {expected}


def test_eos_mean_is_near_the_parameter() -> None:
    params = preset("fast", eos_mean_tokens=40.0)
    spec = GenerationSpec((1,), max_tokens=100_000)
    lengths = [stop_point(params, i, spec)[0] for i in range(4000)]
    assert statistics.mean(lengths) == pytest.approx(40.0, rel=0.1)


def test_queue_full_and_abort() -> None:
    params = preset("fast", max_num_seqs=1, max_waiting=1, decode_base_ms=2.0)  # 2 in all

    async def body(engine: Engine) -> None:
        long = engine.submit(GenerationSpec((1,), max_tokens=1000, ignore_eos=True))
        await long.next_events()  # it is running now
        queued = engine.submit(GenerationSpec((1,), max_tokens=3, ignore_eos=True))
        with pytest.raises(QueueFull):
            engine.submit(GenerationSpec((1,), max_tokens=3, ignore_eos=True))
        engine.abort(long)  # frees the only slot: the queued one runs
        assert len(await drain(queued)) == 3
        assert engine.scheduler.kv_used == 0

    run_with_engine(params, body)


def test_crash_cuts_everything_then_restarts() -> None:
    params = preset("fast", max_num_seqs=1, decode_base_ms=2.0, restart_s=0.2)

    async def body(engine: Engine) -> None:
        running = engine.submit(GenerationSpec((1,), max_tokens=1000, ignore_eos=True))
        waiting = engine.submit(GenerationSpec((1,), max_tokens=5, ignore_eos=True))
        await running.next_events()
        engine.request_crash()
        await drain(running)
        await drain(waiting)
        assert running.cut and waiting.cut and not running.done
        await asyncio.sleep(0.01)
        assert not engine.up
        with pytest.raises(Unavailable):
            engine.submit(GenerationSpec((1,), max_tokens=5))
        while not engine.up:
            await asyncio.sleep(0.02)
        assert engine.restarts == 1
        after = engine.submit(GenerationSpec((1,), max_tokens=5, ignore_eos=True))
        assert len(await drain(after)) == 5

    run_with_engine(params, body)


def test_dynamic_memory_past_the_gpu_total_crashes() -> None:
    # 4096 + 512 + 0.5 MiB/token: past 8192 MiB at 7168 KV tokens
    params = preset("oom", decode_base_ms=1.0, decode_per_seq_ms=0.0, restart_s=0.1)

    async def body(engine: Engine) -> None:
        requests = [
            engine.submit(GenerationSpec((1000,), max_tokens=1000, ignore_eos=True))
            for _ in range(8)
        ]
        for request in requests:
            await drain(request)
        assert all(r.cut for r in requests)
        assert engine.restarts == 1

    run_with_engine(params, body)


def test_the_crash_line_is_the_gpu_total() -> None:
    """The engine's OOM test: 4096 + 512 + 0.5 MiB/token passes 8192 MiB past 7168 KV tokens
    (28 sequences of 128 + 128); never with pre-allocation, crashing off, or the fast preset."""
    assert not would_oom(preset("oom"), 7168) and would_oom(preset("oom"), 7169)
    for params in (preset("oom", kv_prealloc=True), preset("oom", oom_crash=False), preset("fast")):
        assert not would_oom(params, 10**9)


def test_prealloc_never_crashes() -> None:
    params = preset("oom", kv_prealloc=True, decode_base_ms=1.0, decode_per_seq_ms=0.0)

    async def body(engine: Engine) -> None:
        requests = [
            engine.submit(GenerationSpec((1000,), max_tokens=100, ignore_eos=True))
            for _ in range(8)
        ]
        for request in requests:
            assert len(await drain(request)) == 100
        assert engine.restarts == 0

    run_with_engine(params, body)


def test_counters_with_chunked_prefill() -> None:
    params = preset("fast", decode_base_ms=1.0, max_num_batched_tokens=64)

    async def body(engine: Engine) -> None:
        requests = [engine.submit(GenerationSpec((100,), max_tokens=5, ignore_eos=True))
                    for _ in range(3)]  # fmt: skip
        for request in requests:
            assert len(await drain(request)) == 5
        assert engine.generation_tokens_total == 15
        assert engine.prompt_tokens_total == 300
        assert engine.health.steps > 5 + 2  # prefill took extra steps (5 without chunking)

    run_with_engine(params, body)
