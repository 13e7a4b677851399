"""The progress lines' and the closing line's words, from plain numbers (issue 41, item 6)."""

from __future__ import annotations

import pytest

from loadknee_core.contract import STOP_REASONS
from loadknee_locust.sweep import progress_text as pt


@pytest.mark.parametrize(
    ("facts", "text"),
    [
        (
            pt.ProgressFacts("stage 2/6", 2, "measure", 24, 0, "25 s left"),
            "stage 2/6 (2 users) measure | 24 requests, 0 errors | 25 s left",
        ),
        (
            pt.ProgressFacts("baseline", 1, "warmup", 1, 1, "time left unknown"),
            "baseline (1 user) warmup | 1 request, 1 error | time left unknown",
        ),
        (
            pt.ProgressFacts("stage 6/6", 32, "cooldown", 0, 2, "0 s left", True, "duration"),
            "stage 6/6 (32 users) finished | 0 requests, 2 errors | 0 s left"
            " | the plan ran to its last level",
        ),
        (
            pt.ProgressFacts("refine stage 1", 12, "cooldown", 5, 0, "0 s left", True, None),
            "refine stage 1 (12 users) finished | 5 requests, 0 errors | 0 s left",
        ),
    ],
)
def test_progress_line(facts: pt.ProgressFacts, text: str) -> None:
    assert pt.progress_text(facts) == text


@pytest.mark.parametrize(
    ("measured", "asked", "eta", "text"),
    [
        (0, 20, None, "0 of 20 measured; time left unknown"),
        (12, 20, 7.6, "12 of 20 measured; ~8 s left in this stage"),
        (20, 20, 2.0, "20 measured (20 asked); ~2 s left in this stage"),
        # requests in flight when the count was reached still count: never "21/20"
        (21, 20, None, "21 measured (20 asked); time left unknown"),
    ],
)
def test_count_window(measured: int, asked: int, eta: float | None, text: str) -> None:
    assert pt.count_window_text(measured, asked, eta) == text


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (
            ("knee_confirmed", (32,), 3, 14.2, -28.0),
            "sweep over: the knee was found, refined and confirmed by the level above it; "
            "1 grid level skipped (32 users) and 3 refine stages added: about 28 s more than "
            "the full grid, for a finer answer (14 s per level)",
        ),
        (
            ("knee_confirmed", (48, 64), 1, 10.0, 10.0),
            "sweep over: the knee was found, refined and confirmed by the level above it; "
            "2 grid levels skipped (48, 64 users) and 1 refine stage added: about 10 s saved "
            "against the full grid (10 s per level)",
        ),
        (
            ("knee_confirmed", (32,), 1, 18.0, 0.2),  # one skipped, one added
            "sweep over: the knee was found, refined and confirmed by the level above it; "
            "1 grid level skipped (32 users) and 1 refine stage added: about as long as the "
            "full grid, for a finer answer (18 s per level)",
        ),
        (
            ("duration", (), 0, 14.0, 0.0),  # was "with 0 grid level(s) skipped []"
            "sweep over: the plan ran to its last level; every grid level ran, none added "
            "(14 s per level)",
        ),
        (
            ("red_line", (1,), 0, 9.0, 9.0),
            "sweep over: a stage crossed the red line (errors or P95 latency); 1 grid level "
            "skipped (1 user): about 9 s saved against the full grid (9 s per level)",
        ),
    ],
)
def test_stop_line(args: tuple, text: str) -> None:  # type: ignore[type-arg]
    assert pt.stop_text(*args) == text


def test_every_stop_reason_has_words() -> None:
    assert set(pt.STOP_WORDS) == set(STOP_REASONS)
    assert all("_" not in words for words in pt.STOP_WORDS.values())  # no key shown raw
