"""A refusal (the server's admission limit) against a breakdown, on values (issue 39, item 3)."""

from __future__ import annotations

import math

import pytest

from loadknee_core.refusals import (
    Failure,
    is_refusal,
    overload_message,
    refused_count,
    refusing_stage,
    stage_refuses,
)

SERVED_P50_MS = 400.0


@pytest.mark.parametrize(
    ("failure", "served_p50_ms", "refusal"),
    [
        # TGI's --max-concurrent-requests: 429 "Model is overloaded", at once
        (Failure("http_error", 429, "HTTP 429: Model is overloaded", 3.0), SERVED_P50_MS, True),
        # the message alone decides a 429/503, however long it took
        (Failure("http_error", 503, "service unavailable", 900.0), SERVED_P50_MS, True),
        (Failure("http_error", 429, "Too Many Requests", None), None, True),
        # a fast failure with no overload words: refused before any work (a gateway's reset)
        (Failure("connect_error", None, "connection reset", 5.0), SERVED_P50_MS, True),
        (Failure("http_error", 500, "internal error", 80.0), SERVED_P50_MS, True),
        # a 5xx after work, a slow reset: a breakdown
        (Failure("http_error", 500, "internal error", 390.0), SERVED_P50_MS, False),
        (Failure("connect_error", None, "connection reset", 81.0), SERVED_P50_MS, False),
        # no served request to compare with and no overload words: not a refusal
        (Failure("http_error", 500, "internal error", 1.0), None, False),
        (Failure("http_error", 500, "internal error", 1.0), math.nan, False),
        # timeouts, cut streams and error objects are never refusals
        (Failure("timeout", None, "timed out", 1.0), SERVED_P50_MS, False),
        (Failure("incomplete", None, "stream cut", 1.0), SERVED_P50_MS, False),
        (Failure("stream_error", 429, "overloaded", 1.0), SERVED_P50_MS, False),
    ],
)
def test_a_failure_is_a_refusal_when_turned_away_at_once(
    failure: Failure, served_p50_ms: float | None, refusal: bool
) -> None:
    assert is_refusal(failure, served_p50_ms) is refusal


@pytest.mark.parametrize(
    ("text", "overload"),
    [
        ("Model is overloaded", True),
        ("Rate limit reached", True),
        ("server busy, try again", True),
        ("prompt too long", False),
        ("", False),
    ],
)
def test_overload_messages(text: str, overload: bool) -> None:
    assert overload_message(text) is overload


def test_a_stage_refuses_only_when_every_failure_is_a_refusal() -> None:
    refused = Failure("http_error", 429, "Model is overloaded", 2.0)
    slow = Failure("timeout", None, "timed out", 60_000.0)
    assert refused_count([refused, refused], SERVED_P50_MS) == (2, 2)
    assert refused_count([refused, slow], SERVED_P50_MS) == (1, 2)
    assert stage_refuses(2, 2, 10) is True
    assert stage_refuses(1, 2, 10) is False  # a slow failure among them: the red line
    assert stage_refuses(0, 0, 10) is False  # no failure: nothing refused
    assert stage_refuses(5, 5, 0) is False  # everything turned away: down, not full


def test_refusing_stage_compares_with_the_served_median() -> None:
    fast = Failure("http_error", 500, "internal error", 50.0)
    assert refusing_stage([fast], [400.0, 390.0, 410.0]) is True
    assert refusing_stage([fast], [200.0, 240.0, 260.0]) is False  # 50 ms > 20 % of 240 ms
    assert refusing_stage([fast], []) is False
