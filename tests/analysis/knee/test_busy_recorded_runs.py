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
* ``refuse10-hidden-slow-server`` (no ``/metrics``): the server's own process was starved for
  the 2 s refine stage at 10 users (TTFT P50 140 ms against 76 ms at every other level): a third
  of its requests read as waiting, 0.76 on average, the answer was 9 "bound by the knee", while
  16 users, 9.9 in flight (as many), saw 0.10 wait. A queue does not empty as users are added:
  that stage is critical ("queue passed"), and the refusals bound the answer.
* ``refuse10-hidden-dip`` (no ``/metrics``): the same starved server at 10 users served 954 tok/s
  at twice its latency, then 1,720 at 12 users (10 in flight, refusing the rest) at its usual
  latency: the flattening at 10 was a dip, seen past the refusing stage.
"""

from __future__ import annotations

import pytest

from analysis.pipeline import analyze_run
from tests.support.paths import REPO

RUNS = REPO / "tests" / "support" / "data" / "busy_runs"


CASES = [
    ("refuse10-hidden", 10),
    ("refuse20-metrics", 20),
    ("refuse10-hidden-slow-server", 10),
    ("refuse10-hidden-dip", 10),
]


@pytest.mark.parametrize(("run", "limit"), CASES)
def test_a_busy_clients_stragglers_are_not_the_servers_limit(run: str, limit: int) -> None:
    analysis = analyze_run(RUNS / run)
    knee = analysis.knee
    assert knee.max_concurrency is not None
    assert limit - 1 <= knee.max_concurrency <= limit, (run, knee.max_concurrency)
    deploy = analysis.recommendations.deploy
    assert deploy is not None and deploy.bound == "refusals", (run, deploy)
    if run == "refuse10-hidden-slow-server":  # the slow stage's queue passed, and says so
        (slow,) = [v for v in knee.stages if v.target_users == limit and v.stage == 7]
        passed = next(s for s in slow.signals if s.name == "queue_passed")
        assert slow.verdict == "critical" and passed.fired, slow
        assert (passed.fact.later_users, passed.fact.waiting > 0.5) == (16, True), passed.fact
    if run == "refuse10-hidden-dip":  # the dip is named, with the refusing stage that out-served it
        (slow,) = [v for v in knee.stages if v.target_users == limit and v.stage == 7]
        resumed = next(s for s in slow.signals if s.name == "throughput_resumed")
        assert slow.verdict == "critical" and resumed.fired and resumed.fact.later_users == 12
    waited = [
        v.target_users
        for v in knee.stages
        if any(s.name == "client_saturated" and s.fired for s in v.signals)
    ]
    if run == "refuse10-hidden":  # without gauges, the client's estimate is the only queue
        assert waited == [], waited
