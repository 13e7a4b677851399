"""The saturation model against a measured sweep of the real simulator: a timing check.

The simulator is one Python process: at 64 streams it needs most of a core, so beside six test
processes and a CPU hog (fresh #22, load ~8 on 2 cores) it served 326 tok/s where the model says
568. That reads the machine, not the model, so the test is ``quiet`` (no other test runs beside
it, tests/conftest.py) and this file holds only it: files with a quiet test run last.
"""

from __future__ import annotations

import asyncio

import pytest

from loadknee_locust.sim.params import preset
from loadknee_locust.sim.saturation import expected_throughput, saturation_concurrency
from tests.support.sim_probe import closed_loop


@pytest.mark.quiet
@pytest.mark.slow
def test_measured_sweep_matches_the_model(sim_server) -> None:
    """Throughput at 1, 4, 16, 64 streams rises, then flattens where the model says (±20 %)."""
    params = preset("fast")
    sim = sim_server(preset="fast")
    io = (32, 64)
    measured = {}
    for c in (1, 4, 16, 64):
        loop = closed_loop(
            sim.url,
            concurrency=c,
            input_tokens=io[0],
            output_tokens=io[1],
            warmup_s=0.4,
            window_s=1.5,
        )
        result = asyncio.run(loop)
        assert result.requests_failed == 0
        measured[c] = result.tokens_per_s
    for c, tokens_per_s in measured.items():
        assert tokens_per_s == pytest.approx(expected_throughput(params, c, *io), rel=0.2), c
    assert saturation_concurrency(params, *io) == 8.0
    assert measured[4] > 2.5 * measured[1]  # below c*: scaling
    assert measured[16] > 1.3 * measured[4]
    assert measured[64] < 1.1 * measured[16]  # beyond c*: flat
