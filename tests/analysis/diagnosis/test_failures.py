"""Sample-size warnings and the all-failed reason, from typed-in frames, as facts."""

from __future__ import annotations

import pandas as pd

from analysis.diagnosis.facts import AllFailedFact, SmallStageFact
from analysis.diagnosis.failures import all_failed_warnings, error_causes, small_stage_warnings
from tests.support.knee_frames import sweep


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
    assert error_causes(requests) == [("HTTP 503", 5), ("read timed out", 2), ("incomplete", 1)]
    assert all_failed_warnings(requests) == [
        AllFailedFact(8, (("HTTP 503", 5), ("read timed out", 2), ("incomplete", 1)))
    ]
    served = pd.concat([requests, pd.DataFrame({"outcome": ["ok"]})], ignore_index=True)
    assert all_failed_warnings(served) == []


def test_counted_says_one_user_and_one_request() -> None:
    from analysis.numeric import counted

    said = [counted(1, "user"), counted(16, "user"), counted(1, "request"), counted(0, "request")]
    assert said == ["1 user", "16 users", "1 request", "0 requests"]
