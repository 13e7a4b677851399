"""When KV room freed for each request (analysis/stages/kv_grants), on closed loops simulated
exactly here: a server that admits the oldest waiting request when its prompt fits beside the KV
the running ones hold (each holding its prompt and the tokens it has generated), with a length
mix, against the same loop with no KV limit."""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass

import numpy as np
import pytest

from analysis.stages.kv_grants import kv_grants
from analysis.stages.slot_count import service_starts

STEP_S = 0.01
#: (prompt, completion) tokens, sent in turn: contexts of 250-930 tokens
MIX = [(600, 40), (100, 120), (300, 60), (50, 200), (900, 30), (200, 80)]
BUDGET = 3000


@dataclass
class _Request:
    start: float
    prompt: int
    out: int
    admitted: float = np.nan
    first: float = np.nan
    end: float = np.nan
    generated: int = 0


def kv_loop(users: int, budget: int | None, mix=MIX, seconds: float = 30.0) -> dict:
    """Arrays of a closed loop of ``users`` (no think time) on a server stepping every STEP_S:
    the oldest waiting request is admitted while its prompt fits ``budget`` (None: no limit),
    every running one generates a token per step, its first one step after its admission."""
    lengths = itertools.cycle(mix)
    queue = deque(_Request(0.0, *next(lengths)) for _ in range(users))
    running: list[_Request] = []
    done: list[_Request] = []
    for k in range(int(seconds / STEP_S)):
        t = k * STEP_S
        held = sum(r.prompt + r.generated for r in running)
        while queue and (budget is None or held + queue[0].prompt <= budget):
            request = queue.popleft()
            request.admitted, held = t, held + request.prompt
            running.append(request)
        for r in running:
            r.generated += 1
            r.first = t + STEP_S if r.generated == 1 else r.first
        for r in [r for r in running if r.generated >= r.out]:
            r.end = t + STEP_S
            running.remove(r)
            done.append(r)
            queue.append(_Request(r.end, *next(lengths)))
    return {
        name: np.array([getattr(r, name) for r in done], dtype=float)
        for name in ("start", "admitted", "first", "end", "prompt", "out")
    }


def _mean_waiting(served: np.ndarray, run: dict) -> float:
    return float((served - run["start"]).sum() / (run["end"].max() - run["start"].min()))


@pytest.mark.parametrize(
    ("users", "budget", "waiting"),
    [
        (4, BUDGET, 0.0),
        (8, BUDGET, 0.0),
        (12, BUDGET, 1.45),  # 10.3 running on average, 12 decoding at the most
        (16, BUDGET, 5.31),
        (12, None, 0.0),
        (24, None, 0.0),
    ],
)
def test_the_waits_for_room_are_the_servers(users, budget, waiting):
    run = kv_loop(users, budget)
    truth = _mean_waiting(run["admitted"], run)
    assert truth == pytest.approx(waiting, abs=0.01)  # the loop itself, as simulated
    grants = kv_grants(run["start"], run["first"], run["end"], run["prompt"], run["out"])
    assert grants is not None
    by_slots = service_starts(run["start"], run["first"], run["end"])
    estimate = _mean_waiting(np.maximum(by_slots, grants.served_from), run)
    assert estimate == pytest.approx(truth, abs=0.05)
    if truth > 0:  # the count decoding at once peaks with the short requests: too many slots
        assert _mean_waiting(by_slots, run) < truth - 1.0


def test_the_fill_reaches_the_budget_only_where_requests_wait_for_room():
    """Two levels of one run (4 users, then 12): the budget is the run's most, so the 4 users
    that never filled it read well under it, the 12 that waited for room at it."""
    low, high = kv_loop(4, BUDGET), kv_loop(12, BUDGET)
    run = {
        name: np.concatenate([low[name], high[name] + 100.0]) for name in ("start", "first", "end")
    }
    run |= {name: np.concatenate([low[name], high[name]]) for name in ("prompt", "out")}
    grants = kv_grants(run["start"], run["first"], run["end"], run["prompt"], run["out"])
    assert grants is not None
    at_4, at_12 = grants.fill_pct[: len(low["start"])], grants.fill_pct[len(low["start"]) :]
    assert float(at_4.max()) < 70.0  # 4 users hold at most ~2,000 of the 3,000 tokens
    assert float(at_12.max()) == pytest.approx(100.0)
    assert float(np.median(at_12)) >= 90.0


def test_fixed_lengths_and_unknown_tokens_leave_it_to_the_slots():
    run = kv_loop(12, BUDGET, mix=[(300, 60)])
    assert kv_grants(run["start"], run["first"], run["end"], run["prompt"], run["out"]) is None
    run = kv_loop(12, BUDGET)
    unknown = run["prompt"].copy()
    unknown[: len(unknown) // 5] = np.nan  # a fifth of the counts missing
    assert kv_grants(run["start"], run["first"], run["end"], unknown, run["out"]) is None
