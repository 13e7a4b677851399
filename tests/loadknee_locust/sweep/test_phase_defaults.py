"""Warm-up and cooldown that follow the stage length when not given (issue 41, item 3)."""

from __future__ import annotations

import pytest

from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.plugin.validate import option_problems
from loadknee_locust.sweep import phase_defaults as pd
from loadknee_locust.sweep.schedule import SchedulePlan


@pytest.mark.parametrize(
    ("given", "stage_s", "warmup_s", "cooldown_s"),
    [
        (None, 120.0, 30.0, 10.0),  # the timed method's 2-minute stage: its own 30 s and 10 s
        (None, 4.0, 1.0, 1.0),  # a quarter each
        (None, 12.0, 3.0, 3.0),
        (None, 40.0, 10.0, 10.0),  # the cooldown reaches its cap first
        (None, 600.0, 30.0, 10.0),  # both capped
        (None, None, 30.0, 10.0),  # no planned length (auto): the caps
        (None, 0.0, 30.0, 10.0),  # count mode passes 0: the caps
        (5.0, 4.0, 5.0, 5.0),  # given: as given, even past the stage (the plan refuses that)
        (0.0, 120.0, 0.0, 0.0),
    ],
)
def test_the_rule(
    given: float | None, stage_s: float | None, warmup_s: float, cooldown_s: float
) -> None:
    assert pd.warmup_seconds(given, stage_s) == warmup_s
    assert pd.cooldown_seconds(given, stage_s) == cooldown_s


@pytest.mark.parametrize(
    ("text", "value"), [("auto", None), (" AUTO ", None), ("", None), ("3", 3.0), (2.5, 2.5)]
)
def test_parse(text: str | float, value: float | None) -> None:
    assert pd.parse_phase_seconds(text, "--x") == value


@pytest.mark.parametrize("text", ["-1", "ten", "nan", "inf"])
def test_parse_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="--x"):
        pd.parse_phase_seconds(text, "--x")


@pytest.mark.parametrize(
    ("options", "warmup_s", "cooldown_s"),
    [
        ({"stage_seconds": "4"}, 1.0, 1.0),  # `loadknee run --stage-seconds 4`, nothing else
        ({}, 30.0, 10.0),  # the defaults: 120 s stages
        ({"stage_seconds": "4", "warmup_seconds": "0.5"}, 0.5, 1.0),
        ({"stage_seconds": "4", "cooldown_seconds": "3"}, 1.0, 3.0),
        ({"stage_seconds": "0", "stage_requests": "40"}, 30.0, 10.0),  # counted: no length
        ({"stage_seconds": "auto"}, 30.0, 10.0),
        ({"stage_seconds": "20", "stage_requests": "40"}, 30.0, 10.0),  # a count wins
    ],
)
def test_the_plan_applies_the_rule(
    options: dict[str, str], warmup_s: float, cooldown_s: float
) -> None:
    opts = LlmOptions(**options)  # type: ignore[arg-type]
    assert option_problems(opts) == []
    plan = SchedulePlan.from_options(opts)
    assert (plan.warmup_seconds, plan.cooldown_seconds) == (warmup_s, cooldown_s)


def test_a_given_warmup_longer_than_the_stage_is_still_refused() -> None:
    problems = option_problems(LlmOptions(stage_seconds="4", warmup_seconds="5"))
    # words are the product: the message a user reads for bad input
    assert len(problems) == 1 and "--llm-warmup-seconds (5)" in problems[0], problems
