"""Concurrency probe: one burst of streamed requests at the run's prompt and one at twice it.

Why: a run of one prompt length cannot tell a slot limit from a KV budget that fills at the same
batch (both cap the running batch where the knee sits, and without ``/metrics`` the rows look the
same), yet a what-if at longer contexts turns on which it was: slots hold the same batch at any
length, a KV budget fewer sequences the longer each is. Sending ``size`` requests at once and
noting when each one's first token came and when it ended shows how many the server streamed at
once; the same count at twice the prompt is a slot limit, a count that falls with the context is
the KV budget (``analysis.predict.limits_probe`` reads them; this module only sends and times).

The bursts go out in ``loadknee run``'s pre-flight (``commands.preflight``), before Locust starts:
never inside a stage's clock (in the users' preparation they took the first stage's seconds, and
an open-loop schedule's first arrivals went out late by them), once per run whatever the
workers; counted as setup requests, never rows. Each request asks :data:`PROBE_TOKENS` tokens:
long enough for the requests admitted together to overlap for several decode steps, short
enough that the bursts cost a second or two. ``send`` makes and times one request (the
pre-flight wires the HTTP call in), one thread each, so the bursts are testable with a plain
function that sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

#: the prompt lengths of the two bursts, as multiples of the run's target length
LENGTH_FACTORS = (1.0, 2.0)
#: requests per burst: above the slot counts a what-if turns on, below the sweep's top level
BURST_SIZE = 32
#: completion tokens each probe request asks
PROBE_TOKENS = 16

#: one probe request's outcome: prompt tokens (None: not reported), the first content chunk's and
#: the end's seconds on ``time.perf_counter``'s timeline
Streamed = tuple[int | None, float, float]


def probe_concurrency(
    send: Callable[[int], Streamed],
    words_for: Callable[[int], int],
    target: int,
    size: int = BURST_SIZE,
) -> list[dict[str, Any]]:
    """One record per burst, in the order sent (a burst none of whose requests streamed is left
    out): its target prompt tokens, the median prompt tokens the server reported, the requests
    sent and failed, and each answered request's ``[sent ms, first token ms, end ms]`` from the
    burst's start (when it was sent too: a thread that started late is no request that waited).

    ``send(words)`` sends one request of ``words`` filler words and returns a
    :data:`Streamed`; it may raise (an error, no content, a cut stream: that request counts as
    failed, never fatal).
    """
    bursts = []
    for factor in LENGTH_FACTORS:
        tokens = max(1, round(target * factor))
        burst = _burst(send, words_for(tokens), size)
        if burst["streams"]:
            bursts.append({"target_tokens": tokens, **burst})
    return bursts


def _burst(send: Callable[[int], Streamed], words: int, size: int) -> dict[str, Any]:
    results: list[tuple[float, Streamed] | None] = [None] * size
    start = time.perf_counter()

    def one(index: int) -> None:
        sent = time.perf_counter()
        try:
            results[index] = sent, send(words)
        except Exception:  # this request's failure is its own: the burst goes on
            results[index] = None

    with ThreadPoolExecutor(max_workers=size, thread_name_prefix="concurrency-probe") as pool:
        for index in range(size):
            pool.submit(one, index)
    answered = [r for r in results if r is not None]
    prompt = sorted(p for _, (p, _, _) in answered if p is not None)
    return {
        "prompt_tokens": prompt[len(prompt) // 2] if prompt else None,
        "completion_tokens": PROBE_TOKENS,
        "sent": size,
        "failed": size - len(answered),
        "streams": sorted(
            [round((t - start) * 1000.0, 2) for t in (sent, first, end)]
            for sent, (_, first, end) in answered
        ),
    }
