"""Sample-size warnings and the all-failed reason, from typed-in frames."""

from __future__ import annotations

import pandas as pd

from analysis.diagnosis.failures import all_failed_warnings, error_causes, small_stage_warnings
from tests.support.knee_frames import sweep


def test_small_stages_are_named_with_their_sample_size():
    summary = sweep([1, 2, 4], [100, 200, 400], [100] * 3, requests=[12, 40, 80],
                    window_s=[30.0, 30.0, 3.0])  # fmt: skip
    warnings = small_stage_warnings(summary)
    assert len(warnings) == 2
    assert warnings[0].startswith("1 user: only 12 requests over 30.0 s measured")
    assert warnings[1].startswith("4 users: only 80 requests over 3.0 s measured")
    assert all("(rule: Small stage)" in w for w in warnings)


def test_all_failed_names_the_top_causes_counted():
    requests = pd.DataFrame({
        "outcome": ["http_error"] * 5 + ["timeout"] * 2 + ["incomplete", "cancelled"],
        "http_status": [503.0] * 5 + [float("nan")] * 4,
        "error": [""] * 5 + ["read timed out"] * 2 + ["", "user stopped before the response"],
    })  # fmt: skip  # the stop's cancelled row is neither counted nor a cause
    assert error_causes(requests) == [("HTTP 503", 5), ("read timed out", 2), ("incomplete", 1)]
    (line,) = all_failed_warnings(requests)
    assert line.startswith(
        "all 8 requests failed (5 × HTTP 503, 2 × read timed out, 1 × incomplete)"
    )
    served = pd.concat([requests, pd.DataFrame({"outcome": ["ok"]})], ignore_index=True)
    assert all_failed_warnings(served) == []


def test_counted_says_one_user_and_one_request() -> None:
    from analysis.numeric import counted

    said = [counted(1, "user"), counted(16, "user"), counted(1, "request"), counted(0, "request")]
    assert said == ["1 user", "16 users", "1 request", "0 requests"]
