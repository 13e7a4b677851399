"""Runs recorded on a busy machine, where the answer once came out wrong: the knee must now get
them right (a table on values, no sweep).

Both are default ``loadknee run`` sweeps against the independent refusing server of
``tests/e2e/test_refusals_independent.py`` (it answers 429 "Model is overloaded" while ``limit``
requests are in it, and queues nothing), recorded while the suite ran four test processes on two
cores (``tests/support/data/busy_runs``, the files as written, ``locust.log`` left out):

* ``refuse10-hidden`` (no ``/metrics``): at 10 users a few requests came late from the busy
  client (5 % of them, 94 ms), which read as 0.59 requests waiting; the answer was 9.
* ``refuse20-metrics`` (the server's gauges: running up to 20, nothing ever waiting): the client
  read 18.2 running at 20 users with 20 % of its requests late, and the answer was 18.
"""

from __future__ import annotations

import pytest

from analysis.pipeline import analyze_run
from tests.support.paths import REPO

RUNS = REPO / "tests" / "support" / "data" / "busy_runs"


@pytest.mark.parametrize(("run", "limit"), [("refuse10-hidden", 10), ("refuse20-metrics", 20)])
def test_a_busy_clients_stragglers_are_not_the_servers_limit(run: str, limit: int) -> None:
    knee = analyze_run(RUNS / run).knee
    assert knee.max_concurrency is not None
    assert limit - 1 <= knee.max_concurrency <= limit, (run, knee.max_concurrency)
    waited = [
        v.target_users
        for v in knee.stages
        if any(s.name == "client_saturated" and s.fired for s in v.signals)
    ]
    if run == "refuse10-hidden":  # without gauges, the client's estimate is the only queue
        assert waited == [], waited
