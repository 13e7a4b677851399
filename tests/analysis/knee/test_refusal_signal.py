"""A refusing stage ends the capacity under its own name; a slow failure stays the red line
(issue 39, item 3). Record tables typed in as data; assertions on values."""

from __future__ import annotations

import pytest

from analysis.advice.deploy import deploy_answer
from analysis.advice.facts import WithheldFact
from analysis.advice.recommend import recommend
from analysis.knee.find import KneeParams, find_knee
from analysis.knee.refusal_signal import REFUSALS, refusal_limit
from analysis.stages.baseline import compute_baseline
from tests.support.knee_frames import sweep

LEVELS = [2, 4, 8, 10, 11]
TOK_S = [200.0, 400.0, 800.0, 1000.0, 1000.0]


def _analyse(errors: list[int], refused: list[float]):  # type: ignore[no-untyped-def]
    summary = sweep(
        LEVELS, TOK_S, [100.0] * 5, baseline_tok_s=100.0, baseline_p95_ms=100.0,
        ok=[1000] * 5, errors=errors, refused=refused,
    )  # fmt: skip
    knee = find_knee(summary, compute_baseline(None, summary), params=KneeParams())
    return summary, knee


@pytest.mark.parametrize(
    ("errors", "refused", "bound", "max_concurrency", "refusal_users"),
    [
        # 1 % refused at 11 users: under the 5 % red line, yet past the server's own limit
        ([0, 0, 0, 0, 10], [0, 0, 0, 0, 10], "refusals", 10, 11),
        # 40 % refused: the same answer, named the same way
        ([0, 0, 0, 0, 667], [0, 0, 0, 0, 667], "refusals", 10, 11),
        # 40 % failed slowly (timeouts, a 5xx after work): the red line, as before
        ([0, 0, 0, 0, 667], [0, 0, 0, 0, 0], "errors", 10, None),
        # a slow failure among the refusals: a breakdown, not an admission limit
        ([0, 0, 0, 0, 667], [0, 0, 0, 0, 600], "errors", 10, None),
        # 1 % slow failures: an early sign only, the stage stays below the red line
        ([0, 0, 0, 0, 10], [0, 0, 0, 0, 0], "errors", 11, None),
        # frames without the column (other tools, older runs): as before
        ([0, 0, 0, 0, 667], [float("nan")] * 5, "errors", 10, None),
    ],
)
def test_refusals_bound_the_answer_at_the_last_level_without_any(
    errors: list[int],
    refused: list[float],
    bound: str,
    max_concurrency: int,
    refusal_users: int | None,
) -> None:
    summary, knee = _analyse(errors, refused)
    assert knee.max_concurrency == max_concurrency
    limit = refusal_limit(knee)
    assert (None if limit is None else limit.target_users) == refusal_users
    answer = deploy_answer(summary, knee)
    if refusal_users is not None:
        assert answer.users == 10 and answer.bound == bound
        fired = {s.name for s in limit.signals if s.fired} if limit else set()
        assert REFUSALS in fired and knee.red_line_users == refusal_users
    elif max_concurrency == 10:
        assert answer.bound == bound and knee.red_line_users == 11


def test_no_cap_below_the_limit_the_server_enforces() -> None:
    summary, knee = _analyse([0, 0, 0, 0, 10], [0, 0, 0, 0, 10])
    recs = recommend(summary, knee, compute_baseline(None, summary))
    caps = [i for i in recs.items if i.key.endswith("max_num_seqs") and i.value is not None]
    assert caps == []
    assert WithheldFact("refuses", cap=10) in recs.withheld, recs.withheld
