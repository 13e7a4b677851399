"""The server's slots and each request's wait from the client's rows (analysis/stages/slot_count),
on closed loops simulated exactly here: a slot queue (first come first served or not) against a
server with no slot limit whose TTFT grows with its batch, the case a TTFT-excess reading took
for a queue."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from analysis.stages.slot_count import service_starts, slot_count

PREFILL_S, DECODE_S = 0.05, 0.6


def closed_loop(users: int, slots: int | None, *, newest_first: bool = False,
                batch_prefill: bool = False, seconds: float = 20.0):  # fmt: skip
    """(starts, firsts, ends, waits) of a closed loop: ``users`` clients, ``slots`` slots
    (None: no limit), the queue served oldest first or ``newest_first``. A request's first
    token comes PREFILL_S after its slot (× the requests in service with ``batch_prefill``, a
    batched prefill on a compute-bound server), its end DECODE_S ± 5 % later."""
    rng = np.random.default_rng(users * 31 + (slots or 0))
    limit = slots or users
    in_service: list[float] = []  # ends of the requests in service (a heap)
    queue: list[tuple[float, int]] = []
    arrivals = [(u * 0.011, u) for u in range(users)]
    heapq.heapify(arrivals)
    rows = []
    clock = 0.0

    def begin(start: float, at: float) -> float:
        prefill = PREFILL_S * (len(in_service) + 1 if batch_prefill else 1)
        first = at + prefill
        end = first + DECODE_S * rng.uniform(0.95, 1.05)
        heapq.heappush(in_service, end)
        rows.append((start, first, end, at - start))
        return end

    while arrivals or queue:
        next_arrival = arrivals[0][0] if arrivals else np.inf
        next_end = in_service[0] if in_service else np.inf
        if next_end <= next_arrival:
            clock = heapq.heappop(in_service)
            if queue:
                start, user = queue.pop(-1 if newest_first else 0)
                end = begin(start, clock)
                if end < seconds:
                    heapq.heappush(arrivals, (end, user))
            continue
        start, user = heapq.heappop(arrivals)
        if len(in_service) < limit:
            end = begin(start, start)
            if end < seconds:
                heapq.heappush(arrivals, (end, user))
        else:
            queue.append((start, user))
    starts, firsts, ends, waits = (np.array(col) for col in zip(*rows, strict=True))
    return starts, firsts, ends, waits


CASES = {
    # name: (users, slots, newest_first, batch_prefill, slots found)
    "under the slots": (4, 8, False, False, None),
    "at the slots": (8, 8, False, False, None),
    "queue, first come first served": (12, 8, False, False, 8),
    "queue, newest first": (12, 8, True, False, 8),
    "twice the slots": (16, 8, False, False, 8),
    "no limit, batched prefill": (8, None, False, True, None),
    "no limit, 16 users in lockstep": (16, None, False, False, None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_slots_are_the_requests_decoding_at_once(case):
    users, slots, newest, batched, found = CASES[case]
    starts, firsts, ends, _ = closed_loop(users, slots, newest_first=newest, batch_prefill=batched)
    assert slot_count(starts, firsts, ends) == found


@pytest.mark.parametrize("case", list(CASES))
def test_each_wait_is_the_time_until_a_slot_freed(case):
    """The reconstructed waits add up to the true ones (within 5 % of the time in flight), and
    where nothing waited — no limit, however long the batched prefill — none is read."""
    users, slots, newest, batched, _ = CASES[case]
    starts, firsts, ends, waits = closed_loop(
        users, slots, newest_first=newest, batch_prefill=batched
    )
    served = service_starts(starts, firsts, ends)
    assert np.all(served >= starts) and np.all(served <= firsts)
    read = served - starts
    if slots is None or users <= slots:
        assert read.sum() <= 0.01 * (ends - starts).sum(), case
    else:
        assert abs(read.sum() - waits.sum()) <= 0.05 * (ends - starts).sum(), case


def test_no_request_no_count():
    empty = np.array([], dtype=float)
    assert slot_count(empty, empty, empty) is None
    assert len(service_starts(empty, empty, empty)) == 0
