"""Each stage's refusals counted from the measured rows, on values (issue 39, item 3)."""

from __future__ import annotations

import math

import pandas as pd

from analysis.stages.refusals import StageRefusals, stage_refusals

NAN = math.nan


def _rows(rows: list[tuple[int, str, str, float, float, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["stage", "cls", "outcome", "http_status", "e2e_ms", "error"])


def test_refusals_per_stage_with_their_commonest_status_and_message() -> None:
    measured = _rows(
        [
            (1, "ok", "ok", 200, 400.0, ""),
            (1, "ok", "ok", 200, 420.0, ""),
            (2, "ok", "ok", 200, 400.0, ""),
            (2, "error", "http_error", 429, 3.0, "HTTP 429 Model is overloaded"),
            (2, "error", "http_error", 429, 2.0, "HTTP 429 Model is overloaded"),
            (2, "error", "connect_error", NAN, 4.0, "connection reset"),  # fast: refused
            (2, "error", "timeout", NAN, 60_000.0, "timed out"),  # never a refusal
            (3, "ok", "ok", 200, 400.0, ""),
            (3, "error", "http_error", 500, 390.0, "internal error"),  # 5xx after work
        ]
    )
    got = stage_refusals(measured)
    assert got == {2: StageRefusals(3, 429, "HTTP 429 Model is overloaded")}


def test_no_failures_no_refusals() -> None:
    assert stage_refusals(_rows([(1, "ok", "ok", 200, 400.0, "")])) == {}
