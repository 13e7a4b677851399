"""An answer that most resamples do not give is "cannot tell" (issue 39, item 6), on values.

The knee's confidence resamples the stages' time windows and judges each resample by the
answer's own rule (analysis/knee/confidence.py); where another ``max_concurrency`` is more common
than the answer, the answer is the noise's pick, and the standing says so (exit 3, nothing
recommended). The words are held by the golden file ``unsure.txt``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from analysis.advice.standing import answer_standing, moved_by_noise
from analysis.knee.facts import ConfidenceFact, LateClientFact
from analysis.knee.find import find_knee
from analysis.report.standing import cannot_tell_text
from analysis.stages.baseline import compute_baseline
from tests.support.golden import check_golden
from tests.support.knee_frames import sweep


def _knee(same: float | None, others: tuple[tuple[int | None, float], ...]):
    summary = sweep([4, 8, 16], [400.0, 780.0, 800.0], [220.0, 260.0, 900.0],
                    baseline_tok_s=100.0, baseline_p95_ms=200.0)  # fmt: skip
    knee = find_knee(summary, compute_baseline(None, summary))
    assert knee.max_concurrency == 8
    fact = ConfidenceFact(8, True, same, 200, others, 90.0, 60.0)
    return replace(knee, confidence_pct=same, confidence=fact)


@pytest.mark.parametrize(
    ("same", "others", "kind", "why"),
    [
        (45.0, ((4, 55.0),), "cannot_tell", "4 is more common than the answer 8"),
        (30.0, ((4, 35.0), (16, 35.0)), "cannot_tell", "two answers each more common"),
        (55.0, ((4, 45.0),), "answer", "the answer is the most common: it stands, unsure"),
        (30.0, ((4, 25.0), (6, 25.0), (2, 20.0)), "answer", "spread, but the answer leads"),
        (40.0, ((4, 40.0), (2, 20.0)), "answer", "a tie is no majority against it"),
        (None, (), "answer", "no per-window data: no confidence figure, no doubt from it"),
    ],
)
def test_an_answer_most_resamples_do_not_give_is_cannot_tell(same, others, kind, why):
    knee = _knee(same, others)
    standing = answer_standing(knee, None)
    assert standing.kind == kind, why
    assert (standing.reason == "unsure") == (kind == "cannot_tell"), why
    assert (moved_by_noise(knee) is not None) == (kind == "cannot_tell"), why


def test_a_late_client_is_named_before_the_noise():
    knee = _knee(45.0, ((4, 55.0),))
    late = LateClientFact("client_late", 1, 80.0, 120.0, 150.0, 400.0, 3.1, 2, 50.0, 10.0, 5.0)
    assert answer_standing(knee, None, baseline_late=late).reason == "late_client"


def test_the_words_name_every_answer_with_its_share():
    knee = _knee(30.0, ((4, 35.0), (16, 35.0)))
    check_golden("unsure.txt", cannot_tell_text(answer_standing(knee, None), knee) + "\n")
