"""A KV-bound server under a length mix, recorded: the answer with its gauges and without them.

``tests/support/data/sim_runs/kv-bound-lognormal/``: ``loadknee sim --preset kv-bound`` swept at
levels 1, 2, 4, 8, 12, 16 (refined at 13 and 14) replaying a lognormal prompt log (the what-if
benchmark's, ``benchmarks/bench_predict.py``), its ``server_metrics.csv`` cut to the gauges and
counters the analysis reads. Short requests let the server run 13 at once; on average it ran
10.4-11.3 and from 12 users 1.6 or more waited with its KV cache at 90 %. Read as a fixed slot
limit of 13, the sweep was answered 13 with the gauges and 14 without them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.pipeline import analyze_run
from tests.support.run_support import without_server_metrics

RUN = Path(__file__).parents[2] / "support" / "data" / "sim_runs" / "kv-bound-lognormal"


@pytest.fixture(scope="module")
def shown():
    return analyze_run(RUN)


@pytest.fixture(scope="module")
def hidden(tmp_path_factory):
    return analyze_run(without_server_metrics(RUN, tmp_path_factory.mktemp("kv") / "run"))


def test_with_its_gauges_the_queue_under_a_full_kv_cache_is_the_knee(shown):
    assert (shown.knee.knee_users, shown.knee.max_concurrency) == (12, 8)
    twelve = next(v for v in shown.knee.stages if v.target_users == 12)
    saturated = next(s for s in twelve.signals if s.name == "server_saturated")
    assert saturated.fired and saturated.fact.kv_peak_pct == pytest.approx(89.7, abs=0.1)


def test_without_them_the_client_reads_the_same_queue_and_answer(shown, hidden):
    assert hidden.summary["waiting_mean"].isna().all()  # nothing of the gauges left
    assert (hidden.knee.knee_users, hidden.knee.max_concurrency) == (12, 8)
    gauges = shown.summary.set_index("target_users")
    client = hidden.summary[hidden.summary["kind"] != "baseline"].set_index("target_users")
    for users in (12, 13, 14, 16):
        assert client.at[users, "client_waiting"] == pytest.approx(
            gauges.at[users, "waiting_mean"], abs=0.7
        ), users
        assert client.at[users, "client_running"] == pytest.approx(
            gauges.at[users, "running_mean"], rel=0.10
        ), users
    assert client.at[12, "client_kv_fill_pct"] >= 90.0
