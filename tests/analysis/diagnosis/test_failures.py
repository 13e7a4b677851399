"""Sample-size warnings and the all-failed reason, from typed-in frames, as facts."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.diagnosis.facts import AllFailedFact, SharedHostFact, SmallStageFact
from analysis.diagnosis.failures import (
    all_failed_warnings,
    late_client_warnings,
    shared_host_warning,
    small_stage_warnings,
)
from analysis.inputs.load import read_run
from analysis.knee.facts import LateClientFact
from analysis.knee.late_client import (
    LATE_CLIENT_FLOOR_MS,
    LATE_CLIENT_MS,
    LATE_CLIENT_SHARE_PCT,
    is_late_client,
)
from analysis.stages.summary import summarize_stages
from tests.support.knee_frames import sweep
from tests.support.report_fixtures import write_run_dir


def test_small_stages_are_named_with_their_sample_size():
    summary = sweep([1, 2, 4], [100, 200, 400], [100] * 3, requests=[12, 40, 80],
                    window_s=[30.0, 30.0, 3.0])  # fmt: skip
    assert small_stage_warnings(summary) == [
        SmallStageFact(users=1, requests=12, window_s=30.0, min_requests=20, min_seconds=5.0),
        SmallStageFact(users=4, requests=80, window_s=3.0, min_requests=20, min_seconds=5.0),
    ]


def test_all_failed_names_the_top_causes_counted():
    requests = pd.DataFrame({
        "outcome": ["http_error"] * 5 + ["timeout"] * 2 + ["incomplete", "cancelled"],
        "http_status": [503.0] * 5 + [float("nan")] * 4,
        "error": [""] * 5 + ["read timed out"] * 2 + ["", "user stopped before the response"],
    })  # fmt: skip  # the stop's cancelled row is neither counted nor a cause
    assert all_failed_warnings(requests) == [
        AllFailedFact(8, (("HTTP 503", 5), ("read timed out", 2), ("incomplete", 1)))
    ]
    served = pd.concat([requests, pd.DataFrame({"outcome": ["ok"]})], ignore_index=True)
    assert all_failed_warnings(served) == []


def test_counted_says_one_user_and_one_request() -> None:
    from loadknee_core.numeric import counted

    said = [counted(1, "user"), counted(16, "user"), counted(1, "request"), counted(0, "request")]
    assert said == ["1 user", "16 users", "1 request", "0 requests"]


NAN = float("nan")


@pytest.mark.parametrize(
    ("lag_mean_ms", "e2e_p50_ms", "late"),
    [
        (None, 100.0, False),  # not measured (a run from before the lag): never late
        (49.9, 2000.0, False),  # under the absolute limit, 2.5 % of the latency
        (50.0, 2000.0, True),  # at the absolute limit, whatever the latency
        (50.0, None, True),
        (12.0, 100.0, True),  # 12 % of the latency
        (10.0, 100.0, False),  # exactly 10 %: not over
        (4.0, 20.0, False),  # 20 % of a fast server's latency, but under the 5 ms floor
        (5.0, 20.0, True),
        (30.0, None, False),  # no latency to compare with, under the absolute limit
    ],
)
def test_late_client_rule_fires_above_it_and_not_below(lag_mean_ms, e2e_p50_ms, late):
    assert (LATE_CLIENT_MS, LATE_CLIENT_SHARE_PCT, LATE_CLIENT_FLOOR_MS) == (50.0, 10.0, 5.0)
    assert is_late_client(lag_mean_ms, e2e_p50_ms) is late


def test_late_client_stages_are_named_with_their_lag_and_host():
    summary = sweep([1, 2, 4], [100, 200, 400], [100] * 3, e2e_p50_ms=[80.0, 80.0, 300.0],
                    client_lag_mean_ms=[1.0, 9.0, 20.0], client_lag_p95_ms=[1.5, 20.0, 40.0],
                    client_lag_max_ms=[2.0, 30.0, 60.0],
                    host_load_1m=[0.5, 7.9, NAN], host_cpus=[2, 2, NAN])  # fmt: skip
    expected = LateClientFact("client_late", users=2, lag_mean_ms=9.0, lag_p95_ms=20.0,
                              lag_max_ms=30.0,
                              e2e_p50_ms=80.0,
                              host_load_1m=7.9, host_cpus=2, limit_ms=50.0, share_pct=10.0,
                              floor_ms=5.0)  # fmt: skip
    assert late_client_warnings(summary) == [expected]  # 20 ms: under 10 % of 300 ms at 4 users


def test_late_client_from_a_run_dir_fires_where_the_client_lagged(tmp_path):
    """client.csv rows late by 120 ms on average at 8 users only (e2e 250 ms+; their largest
    lags 480 ms): that stage, no other; a
    run written without the lag columns (before they existed) gives no warning at all."""
    lagged = write_run_dir(tmp_path / "lagged", client_lag_ms={8: 120.0}, host_load=(8.2, 2))
    summary = summarize_stages(read_run(lagged))
    assert summary.set_index("target_users")["client_lag_max_ms"].max() == 480.0
    (fact,) = late_client_warnings(summary)
    assert (fact.users, fact.lag_mean_ms, fact.lag_p95_ms, fact.lag_max_ms) == (8, 120, 480, 480)
    assert (fact.host_load_1m, fact.host_cpus) == (8.2, 2)
    old = summarize_stages(read_run(write_run_dir(tmp_path / "old")))
    assert old["client_lag_mean_ms"].isna().all() and old["client_lag_p95_ms"].isna().all()
    assert late_client_warnings(old) == []


NAN = float("nan")


@pytest.mark.parametrize(
    ("url", "loads", "expected"),
    [
        ("http://127.0.0.1:8000", [1.0, 3.8, 4.2], SharedHostFact(16, 4.2, 2, "127.0.0.1", 1.5)),
        ("http://localhost:8000/v1", [3.0, 1.0, 1.0], SharedHostFact(4, 3.0, 2, "localhost", 1.5)),
        ("http://[::1]:8000", [NAN, 3.2, NAN], SharedHostFact(8, 3.2, 2, "::1", 1.5)),
        ("127.0.0.2:9000", [NAN, NAN, 3.0], SharedHostFact(16, 3.0, 2, "127.0.0.2", 1.5)),
        ("http://127.0.0.1:8000", [1.0, 2.9, 2.0], None),  # 1.45 per core: under the limit
        ("http://10.0.0.7:8000", [4.0, 4.0, 4.0], None),  # another machine's server
        ("http://gpu-box:8000", [4.0, 4.0, 4.0], None),
        ("", [4.0, 4.0, 4.0], None),  # a run without its target
    ],
)
def test_a_server_sharing_an_overloaded_machine_is_named_at_its_worst_stage(url, loads, expected):
    summary = sweep([4, 8, 16], [400.0, 700.0, 720.0], [100.0] * 3,
                    host_load_1m=loads, host_cpus=[2, 2, 2])  # fmt: skip
    assert shared_host_warning(summary, {"target_url": url}) == expected


def test_a_run_recorded_before_the_host_load_gives_no_shared_host_warning():
    summary = sweep([4, 8], [400.0, 700.0], [100.0] * 2)
    assert (
        shared_host_warning(
            summary.drop(columns=["host_load_1m"]), {"target_url": "http://127.0.0.1:1"}
        )
        is None
    )
