"""Shared fixtures: ``sim_server`` starts real ``loadknee sim`` subprocesses on free ports.

Usage::

    def test_x(sim_server):
        sim = sim_server(preset="fast", max_num_seqs=4)   # any SimParams field as a keyword
        sim.url            # "http://127.0.0.1:PORT"
        sim.log()          # GET /sim/log: one record per request (server-side truth)
        sim.stats()        # GET /sim/stats: outcome counters, preemptions, restarts, params
        sim.metrics_text() # GET /metrics (Prometheus text)
        sim.crash()        # POST /sim/crash (control is enabled by default here)

Every server started through the factory is stopped at teardown, even when the test fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from loadknee_locust.sim.launch import SimProcess


@pytest.fixture
def sim_server() -> Iterator[Callable[..., SimProcess]]:
    started: list[SimProcess] = []

    def start(preset: str = "fast", **overrides: Any) -> SimProcess:
        overrides.setdefault("allow_control", True)
        sim = SimProcess.start(preset, **overrides)
        started.append(sim)
        return sim

    try:
        yield start
    finally:
        for sim in started:
            sim.stop()
