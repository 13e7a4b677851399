"""The concurrency probe's bursts (``client.concurrency_probe``) against a fake server of threads
and sleeps with a slot limit and a KV budget, read back by the analysis
(``analysis.predict.limits_probe``): the lengths asked, the timings kept, failures counted, and
the limit the two bursts show. The real HTTP path: tests/loadknee_locust/commands/
test_preflight.py, against the simulator."""

from __future__ import annotations

import math
import threading
import time
from collections import deque

import pytest

from analysis.predict.limits_probe import classify, streaming_at_once
from loadknee_locust.client.concurrency_probe import (
    BURST_SIZE,
    PROBE_TOKENS,
    Streamed,
    probe_concurrency,
)

OVERHEAD = 10  # tokens the fake calibration adds to a prompt's words


def _words_for(tokens: int) -> int:
    return tokens - OVERHEAD


class FakeServer:
    """Admits first come, first served while a slot is free and the KV budget holds the request's
    prompt + completion (reserved at admission, as the simulator's ``kv-bound`` preset does);
    each request streams its first token 2 ms after admission and ends 100 ms later."""

    def __init__(self, slots: float, kv_tokens: float, fail_every: int = 0) -> None:
        self.slots, self.kv_tokens, self.fail_every = slots, kv_tokens, fail_every
        self.running, self.used, self.sent = 0, 0, 0
        self.waiting: deque[tuple[int, threading.Event]] = deque()
        self.asked: list[int] = []
        self.lock = threading.Lock()

    def _admit(self) -> None:  # under the lock
        while self.waiting:
            context, admitted = self.waiting[0]
            if self.running >= self.slots or self.used + context > self.kv_tokens:
                return
            self.waiting.popleft()
            self.running, self.used = self.running + 1, self.used + context
            admitted.set()

    def send(self, words: int) -> Streamed:
        prompt = words + OVERHEAD
        context = prompt + PROBE_TOKENS
        admitted = threading.Event()
        with self.lock:
            self.asked.append(words)
            self.sent += 1
            if self.fail_every and self.sent % self.fail_every == 0:
                raise ValueError("probe got HTTP 503")
            self.waiting.append((context, admitted))
            self._admit()
        admitted.wait()
        time.sleep(0.002)
        first = time.perf_counter()
        time.sleep(0.1)
        end = time.perf_counter()
        with self.lock:
            self.running, self.used = self.running - 1, self.used - context
            self._admit()
        return prompt, first, end


def test_two_bursts_at_the_prompt_and_twice_it_keep_every_answer() -> None:
    server = FakeServer(slots=8, kv_tokens=math.inf)
    bursts = probe_concurrency(server.send, _words_for, 250, size=20)
    assert server.asked == [240] * 20 + [490] * 20
    assert [(b["target_tokens"], b["prompt_tokens"], b["sent"], b["failed"]) for b in bursts] == [
        (250, 250, 20, 0),
        (500, 500, 20, 0),
    ]
    for burst in bursts:
        assert burst["completion_tokens"] == PROBE_TOKENS
        streams = burst["streams"]
        assert len(streams) == 20 and streams == sorted(streams)
        assert all(0 <= sent < first < end for sent, first, end in streams)  # ms from the start


def test_failed_requests_are_counted_and_a_burst_with_none_answered_is_left_out() -> None:
    server = FakeServer(slots=8, kv_tokens=math.inf, fail_every=4)
    bursts = probe_concurrency(server.send, _words_for, 250, size=16)
    assert [(b["failed"], len(b["streams"])) for b in bursts] == [(4, 12), (4, 12)]

    def refuses(words: int) -> Streamed:
        raise ValueError("probe got HTTP 500")

    assert probe_concurrency(refuses, _words_for, 250, size=4) == []


#: case → (slots, KV tokens, the limit read, the slots read, a KV budget the span must hold)
LIMIT_CASES = {
    "8 slots": (8, math.inf, "slots", 8, None),
    "a KV budget of 4096": (64, 4096, "kv", None, 4096),
    "8 slots and a KV budget that binds only at twice the prompt": (8, 3400, "kv", 8, 3400),
    "no limit within the burst": (64, math.inf, "unseen", None, None),
    "a KV budget that binds only at twice the prompt": (64, 14336, "kv", None, 14336),
}  # fmt: skip


@pytest.mark.parametrize(("slots", "kv", "limit", "read_slots", "budget"), LIMIT_CASES.values(),
                         ids=LIMIT_CASES)  # fmt: skip
def test_the_bursts_tell_a_slot_limit_from_a_kv_budget(slots, kv, limit, read_slots, budget):
    from analysis.predict.facts import Burst

    server = FakeServer(slots=slots, kv_tokens=kv)
    short, long = (
        Burst(b["prompt_tokens"], b["completion_tokens"], len(b["streams"]),
              *streaming_at_once(b["streams"]))
        for b in probe_concurrency(server.send, _words_for, 250, size=BURST_SIZE)
    )  # fmt: skip
    reading = classify(short, long)
    assert (reading.limit, reading.slots) == (limit, read_slots)
    if budget is None:
        assert reading.kv_tokens is None
    else:
        assert reading.kv_tokens is not None
        assert reading.kv_tokens.low <= budget < reading.kv_tokens.high
