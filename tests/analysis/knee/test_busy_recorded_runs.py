"""Runs recorded on a busy machine, where the answer once came out wrong: the knee must now get
them right, or say "cannot tell" with its evidence (a table on values, no sweep).

Both are default ``loadknee run`` sweeps against the independent refusing server of
``tests/e2e/test_refusals_independent.py`` (it answers 429 "Model is overloaded" while ``limit``
requests are in it, and queues nothing), recorded while the suite ran four test processes on two
cores (``tests/support/data/busy_runs``, the files as written, ``locust.log`` left out):

* ``refuse10-hidden`` (no ``/metrics``): at 10 users a few requests came late from the busy
  client (5 % of them, 94 ms), which read as 0.59 requests waiting; the answer was 9.
* ``refuse20-metrics`` (the server's gauges: running up to 20, nothing ever waiting): the client
  read 18.2 running at 20 users with 20 % of its requests late, and the answer was 18.
* ``refuse10-hidden-slow-server`` (no ``/metrics``): the server's own process was starved for
  the 2 s refine stage at 10 users (TTFT P50 140 ms against 76 ms at every other level). Read
  off TTFT, a third of its requests waited, 0.76 on average, and the answer was 9 "bound by the
  knee"; read from the requests decoding at once (``analysis/stages/slot_count``) nothing waited
  anywhere. The TTFT reading is kept as a patched row below: a queue does not empty as users
  are added, so where one stage alone reads one, that stage is critical ("queue passed").
* ``refuse10-hidden-dip`` (no ``/metrics``): the same starved server at 10 users served 954 tok/s
  at twice its latency, then 1,720 at 12 users (10 in flight, refusing the rest) at its usual
  latency: the flattening at 10 is not the answer.
"""

from __future__ import annotations

import shutil

import pytest

from analysis.cli import main as analyze_main
from analysis.inputs.load import read_run
from analysis.knee.find import find_knee
from analysis.live.answer import judge
from analysis.pipeline import analyze_run
from analysis.predict.cli import main as predict_main
from analysis.report.standing import cannot_tell_text
from analysis.stages.baseline import compute_baseline
from analysis.stages.summary import summarize_stages
from tests.support.late_client import late_cannot_tell
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
    if run in ("refuse10-hidden-slow-server", "refuse10-hidden-dip"):  # the slow stage: no knee
        (slow,) = [v for v in knee.stages if v.target_users == limit and v.stage == 7]
        assert slow.verdict == "critical", slow
    waited = [
        v.target_users
        for v in knee.stages
        if any(s.name == "client_saturated" and s.fired for s in v.signals)
    ]
    if "hidden" in run:  # without gauges, the client's estimate is the only queue: none here
        assert waited == [], waited


def test_a_queue_one_stage_alone_reads_is_passed_not_the_knee() -> None:
    """The slow-server run with the stage at 10 users as the TTFT reading had it (a third of its
    requests late, 0.76 waiting): 16 users kept as many in flight and saw none wait."""
    run = read_run(RUNS / "refuse10-hidden-slow-server")
    summary = summarize_stages(run)
    slow = summary.index[summary["stage"] == 7]
    summary.loc[slow, ["client_waiting", "client_waiting_low", "client_wait_share_pct"]] = [
        0.76, 0.6, 33.0
    ]  # fmt: skip
    summary.loc[slow, "client_running"] = summary.loc[slow, "client_in_flight"] - 0.76
    knee = find_knee(summary, compute_baseline(run, summary))
    (verdict,) = [v for v in knee.stages if v.stage == 7]
    passed = next(s for s in verdict.signals if s.name == "queue_passed")
    assert verdict.verdict == "critical" and passed.fired, verdict
    assert (passed.fact.later_users, passed.fact.waiting) == (16, 0.76), passed.fact


#: the refine table's 10-slot simulator (``--max-num-seqs 10``, 3 s stages) recorded while the
#: suite swept beside it with llama-server at a raised priority (fresh #17): 428 tok/s at 6
#: users, 333 at 8 (load 5-6 on 2 cores), P95 at 8 users 2.01x the baseline. It answered 6
#: for 10 (with /metrics; without, it deployed 6 "bound by the tail's departure"). Kept with
#: the simulator's vllm gauges and counters only (histogram buckets and DCGM rows left out).
STARVED = RUNS / "starved10-metrics"


@pytest.mark.parametrize("metrics", [True, False], ids=["with-metrics", "without-metrics"])
def test_a_starved_simulator_on_a_shared_machine_is_cannot_tell(tmp_path, capsys, metrics):
    run = tmp_path / "run"
    shutil.copytree(STARVED, run)
    if not metrics:
        (run / "server_metrics.csv").unlink()
    analysis = analyze_run(run)
    standing = analysis.standing
    assert (standing.reason, standing.starved and standing.starved.users) == ("starved_server", 8)
    assert late_cannot_tell(analysis)  # with its evidence: overloaded at 8, and the fall there
    assert analyze_main([str(run), "--quiet", "--emit", "none"]) == 3
    assert predict_main([str(run)]) == 3  # no what-if from it either
    assert judge(str(run))["cannot_tell"] == cannot_tell_text(standing, analysis.knee)  # live
    capsys.readouterr()
