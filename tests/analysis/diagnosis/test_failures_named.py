"""Errors named: each failing stage says which failures (outcome, HTTP status, top messages), and
the bottleneck follows their kind: rejections are overload, timeouts stalls, the rest server
errors, never "queueing"."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.diagnosis.facts import FailingFact, FailureKind, FailureMix
from analysis.pipeline import analyze_run
from analysis.report.diagnosis_words import failures_text
from analysis.report.table import format_markdown, record_frame
from tests.support.knee_rundir import request_row, stage_row, write_run

T0 = 1_700_000_000.0
N = 100  # rows per stage: percentages read as counts


def _stage_rows(stage: int, users: int, failures: list[tuple[str, int, str, int]]) -> list[dict]:
    """``failures``: (outcome, http status, error message, how many); the rest ok and fast."""
    start = T0 + stage * 12.0
    rows, n = [], 0
    for outcome, status, message, count in failures:
        for _ in range(count):
            rows.append(
                request_row(stage * 1000 + n, stage, start + 1.2 + n * 0.09, 6000.0 if
                            outcome == "timeout" else 150.0, outcome=outcome,
                            http_status=status, error=message, completion_tokens=None)
            )  # fmt: skip
            n += 1
    while n < N:
        rows.append(request_row(stage * 1000 + n, stage, start + 1.2 + n * 0.09, 180.0))
        n += 1
    return rows


def _analyze(tmp_path: Path, failing: list[tuple[str, int, str, int]]):
    stages = [stage_row(0, 1, T0), stage_row(1, 2, T0 + 12.0)]
    requests = _stage_rows(0, 1, []) + _stage_rows(1, 2, failing)
    return analyze_run(write_run(tmp_path / "run", stages=stages, requests=requests))


def test_rejections_and_timeouts_are_named_with_shares_and_messages(tmp_path: Path) -> None:
    analysis = _analyze(
        tmp_path,
        [("http_error", 503, "queue full", 22), ("timeout", 0, "read timed out", 3)],
    )
    stage = analysis.knee.stages[1]
    mix = stage.failures
    assert isinstance(mix, FailureMix) and stage.reasons[-1] == mix  # the failures named, last
    assert mix.kinds == ((FailureKind("http_error", 503), 22), (FailureKind("timeout"), 3))
    assert mix.messages == (("queue full", 22), ("read timed out", 3))
    assert (mix.requests, mix.overload, mix.stalls, mix.server_errors) == (100, 22, 3, 0)
    assert stage.verdict == "red_line" and stage.bottleneck == "overload"
    reason = stage.bottleneck_reason
    assert isinstance(reason, FailingFact) and reason.mix == mix
    assert (reason.family, reason.share_pct) == ("overload", pytest.approx(22.0))
    assert analysis.knee.stages[0].failures == ""  # a clean stage names nothing
    table = format_markdown(record_frame(analysis.summary, analysis.knee))
    assert failures_text(mix) in table  # the record carries the stage's failures


@pytest.mark.parametrize(
    ("failing", "bottleneck"),
    [
        ([("timeout", 0, "read timed out", 25)], "stalls"),
        ([("incomplete", 200, "stream ended before [DONE]", 12),
          ("http_error", 500, "internal error", 8), ("connect_error", 0, "reset", 5)],
         "server_errors"),
        ([("http_error", 429, "rate limited", 30)], "overload"),
    ],
)  # fmt: skip
def test_the_bottleneck_fits_the_failure(failing: list, bottleneck: str, tmp_path: Path) -> None:
    stage = _analyze(tmp_path, failing).knee.stages[1]
    assert stage.verdict == "red_line"
    assert stage.bottleneck == bottleneck, stage.bottleneck_reason
    total = sum(f[3] for f in failing)
    reason, mix = stage.bottleneck_reason, stage.failures
    assert isinstance(reason, FailingFact) and reason.family == bottleneck
    assert reason.share_pct == pytest.approx(total)  # of N = 100 rows: one family each
    assert isinstance(mix, FailureMix)
    assert sum(n for _, n in mix.kinds) == mix.failed == total
