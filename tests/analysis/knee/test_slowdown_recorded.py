"""A compute-bound server under a length mix, recorded: its tail read as each request's slowdown.

``tests/support/data/sim_runs/compute-bound-lognormal/``: ``loadknee sim --preset compute-bound``
(no hard limit: each step costs 0.3 ms more per running sequence) swept at levels 1-64 replaying
a lognormal prompt log (the what-if benchmark's). Against its own single-user time every request
took about twice as long from 32 users (median slowdown 2.11, P95 2.17); the e2e tail and the
seconds per 1k tokens are set by the mix's longest requests instead (the baseline's P95 of
seconds per 1k tokens, 5.85 s, came from its two largest of 20, where the 1-user level read
3.96), and against that yardstick the tail departed only at 64 users.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.advice.deploy import deploy_answer
from analysis.pipeline import analyze_run
from tests.support.run_support import without_server_metrics

RUN = Path(__file__).parents[2] / "support" / "data" / "sim_runs" / "compute-bound-lognormal"


@pytest.fixture(scope="module", params=["shown", "hidden"])
def analysed(request, tmp_path_factory):
    if request.param == "shown":
        return analyze_run(RUN)
    return analyze_run(without_server_metrics(RUN, tmp_path_factory.mktemp("cb") / "run"))


def test_a_replayed_log_reads_its_tail_as_each_requests_slowdown(analysed):
    knee, summary = analysed.knee, analysed.summary.set_index("target_users")
    assert knee.params["tail_metric"] == "slowdown"
    levels = summary[summary["kind"] != "baseline"]
    # a request alone takes its single-user time, whatever its lengths
    assert levels.at[1, "slowdown_p95"] == pytest.approx(1.0, abs=0.01)
    # with no hard limit all users run at once: each request is slower by its steps' growth
    # with the batch, which the decode time per token measures on its own
    alone = summary[summary["kind"] == "baseline"].at[1, "tpot_p50_ms"]
    for users in (2, 4, 8, 16, 24, 32, 48, 64):
        steps = levels.at[users, "tpot_p50_ms"] / alone
        assert levels.at[users, "slowdown_p50"] == pytest.approx(steps, rel=0.05), users
    assert levels.at[32, "slowdown_p95_low"] <= levels.at[32, "slowdown_p95"]
    assert levels.at[32, "slowdown_p95_high"] >= levels.at[32, "slowdown_p95"]


def test_the_answer_stops_where_requests_took_twice_their_single_user_time(analysed):
    deploy = deploy_answer(analysed.summary, analysed.knee)
    assert (deploy.users, deploy.bound) == (24, "tail")
    by_users = {v.target_users: v for v in analysed.knee.stages}
    tail = next(s for s in by_users[32].signals if s.name == "tail_departure")
    assert tail.fired and tail.fact.metric == "slowdown"
    assert not next(s for s in by_users[24].signals if s.name == "tail_departure").fired
