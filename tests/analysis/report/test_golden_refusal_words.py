"""Golden output: the screen's sentence for a refusing server (issue 39, item 3), each branch
(:func:`analysis.report.refusal_text.refusal_sentence`), in
``tests/support/data/golden/refusal_words.txt`` (one ``case: words`` line each). The values it
says are judged and asserted elsewhere (tests/e2e/test_refusals_independent.py). When a
rewording is intended, regenerate it with the other golden files and review the diff:

    LOADKNEE_UPDATE_GOLDEN=1 python -m pytest -n 0 \\
        tests/analysis/report/test_golden_refusal_words.py
"""

from __future__ import annotations

from analysis.report.refusal_text import refusal_sentence
from analysis.stages.refusals import StageRefusals
from tests.support.golden import check_golden

#: case → (limit, users at the refusing stage, its requests, what the refusals said)
CASES = {
    "status and message, named once": (
        10,
        11,
        67,
        StageRefusals(12, 429, "HTTP 429 Model is overloaded"),
    ),
    "neither status nor message": (6, 7, 40, StageRefusals(5, None, "")),
    "no refusal rows": (6, 7, 40, None),
}


def _text() -> str:
    return "".join(f"{case}: {refusal_sentence(*args)}\n" for case, args in CASES.items())


def test_every_refusal_sentence_has_its_golden_words() -> None:
    text = _text()
    check_golden("refusal_words.txt", text)
