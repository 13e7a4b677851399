"""A curve-replay run read back: how closely it followed the log, and which scale and window
broke first (pure: run-like objects built here, numpy as the oracle)."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.traffic.curve_headroom import replay_break, tracking
from analysis.traffic.headroom import Capacity
from tests.support.check_cases import curve_analysis, curve_run

_run, _analysis = curve_run, curve_analysis


def test_a_replay_that_followed_the_log() -> None:
    got = tracking(_run([2, 4, 4, 8]))
    assert got is not None and got.followed and got.rms == 0.0
    assert got.measured == (2.0, 4.0, 4.0, 8.0)


def test_a_replay_that_fell_behind_says_so() -> None:
    got = tracking(_run([1, 3, 4, 5]))
    assert got is not None and not got.followed
    diff = np.array([1, 3, 4, 5]) - np.array([2, 4, 4, 8])
    assert got.rms == pytest.approx(float(np.sqrt(np.mean(diff**2))))
    assert got.rms_pct == pytest.approx(100 * got.rms / 8)  # the peak at the largest scale
    off = [m - p for m, p in zip(got.measured, got.planned, strict=True)]
    assert max(range(len(off)), key=lambda i: abs(off[i])) == 3 and off[3] < 0  # fell behind


def test_the_first_window_past_the_knee_names_its_scale_and_minute() -> None:
    got = replay_break(_analysis(["comfortable", "comfortable", "comfortable", "knee"]))  # type: ignore[arg-type]
    assert got is not None and got.breaking_scale == 2.0 and got.stage == 3
    assert got.held == (1.0,) and got.log_start_s == 1060.0
    assert (got.users, got.verdict) == (8, "knee")  # at minute 1 of the log (origin 1000 s)


def test_a_window_above_what_the_run_allows_breaks_too() -> None:
    allows = Capacity(3, "knee", "the knee allows 3", "r")
    got = replay_break(_analysis(["comfortable"] * 4), allows)  # type: ignore[arg-type]
    assert got is not None and got.stage == 1 and got.breaking_scale == 1.0 and got.held == ()


def test_no_window_past_the_knee() -> None:
    got = replay_break(_analysis(["comfortable"] * 4))  # type: ignore[arg-type]
    assert got is not None and got.breaking_scale is None and got.held == (1.0, 2.0)
