"""The accounting checks allow a ``cancelled`` row only where the stop cut it: a user's last."""

from __future__ import annotations

import pytest

from tests.support.run_support import assert_cancelled_only_where_stopped, assert_each_served_once


def _row(rid: str, user: str, start: float, outcome: str = "ok") -> dict[str, str]:
    return {"request_id": rid, "worker": "local", "user_id": user,
            "start_unix_s": str(start), "outcome": outcome}  # fmt: skip


def test_the_last_request_of_each_user_may_be_cancelled() -> None:
    rows = [_row("a1", "1", 1.0), _row("a2", "1", 2.0, "cancelled"),
            _row("b1", "2", 1.5), _row("b2", "2", 2.5, "cancelled")]  # fmt: skip
    assert_cancelled_only_where_stopped(rows)
    assert_each_served_once(rows, ["a1", "b1", "b2"])  # a2 never left the client


def test_a_cancelled_request_mid_sweep_fails_the_check() -> None:
    rows = [_row("a1", "1", 1.0, "cancelled"), _row("a2", "1", 2.0), _row("b1", "2", 1.5)]
    with pytest.raises(AssertionError, match="cancelled before their user's last"):
        assert_cancelled_only_where_stopped(rows)
    with pytest.raises(AssertionError):
        assert_each_served_once(rows, ["a2", "b1"])


def test_users_on_other_workers_are_other_users() -> None:
    rows = [_row("a1", "1", 1.0, "cancelled"), {**_row("w1", "1", 2.0), "worker": "1"}]
    assert_cancelled_only_where_stopped(rows)
