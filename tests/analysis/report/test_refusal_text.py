"""The screen's sentence for a refusing server, on values (issue 39, item 3)."""

from __future__ import annotations

from analysis.report.refusal_text import refusal_sentence
from analysis.stages.refusals import StageRefusals


def test_the_sentence_names_the_status_and_message_once() -> None:
    found = StageRefusals(12, 429, "HTTP 429 Model is overloaded")
    assert refusal_sentence(10, 11, 67, found) == (
        "the server refuses above ~10: HTTP 429 'Model is overloaded' (12 of 67 requests at "
        "11 users turned away at once)"
    )


def test_a_refusal_without_status_or_message() -> None:
    assert refusal_sentence(6, 7, 40, StageRefusals(5, None, "")) == (
        "the server refuses above ~6 (5 of 40 requests at 7 users turned away at once)"
    )
    assert refusal_sentence(6, 7, 40, None) == (
        "the server refuses above ~6 (7 users turned away at once)"
    )
