"""The red line's error rule on values: a share strictly above the limit, none without requests."""

from __future__ import annotations

import pytest

from loadknee_core.red_line import crosses_red_line, error_share_pct


@pytest.mark.parametrize(
    ("requests", "errors", "limit", "crossed"),
    [
        (100, 5, 5.0, False),  # at the limit is not above it
        (100, 6, 5.0, True),
        (95, 5, 5.0, True),  # 5.26 %
        (5, 1, 20.0, False),  # exactly 20 %
        (3, 1, 100 / 3, False),  # one third against a third
        (100, 1, 0.0, True),  # 0: any error
        (100, 0, 0.0, False),
        (10, 10, 100.0, False),  # 100: no share is above it
        (10, 10, 99.9, True),
        (0, 0, 0.0, False),  # no request: no share
        (0, 3, 0.0, False),
    ],
)
def test_crosses_red_line(requests: int, errors: int, limit: float, crossed: bool) -> None:
    assert crosses_red_line(requests=requests, errors=errors, limit_pct=limit) is crossed


@pytest.mark.parametrize(
    ("requests", "errors", "share"), [(100, 5, 5.0), (8, 2, 25.0), (3, 3, 100.0), (0, 0, None)]
)
def test_error_share_pct(requests: int, errors: int, share: float | None) -> None:
    assert error_share_pct(requests=requests, errors=errors) == share
