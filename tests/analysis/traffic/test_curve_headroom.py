"""A curve-replay run read back: how closely it followed the log, and which scale and window
broke first (pure: run-like objects built here, numpy as the oracle)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from analysis.traffic.curve_headroom import replay_break, tracking
from analysis.traffic.headroom import Capacity

WINDOWS = [
    {"stage": i, "scale": s, "log_start_s": 1000.0 + 60 * (i % 2),
     "log_end_s": 1060.0 + 60 * (i % 2), "target_users": u, "curve_mean_users": u}
    for i, (s, u) in enumerate([(1.0, 2), (1.0, 4), (2.0, 4), (2.0, 8)])
]  # fmt: skip
CURVE = {"windows": WINDOWS, "scales": [1.0, 2.0], "log_origin_s": 1000.0, "curve_peak_users": 4}


def _run(in_flight: list[int]) -> SimpleNamespace:
    """Stages of 1 s from t = 0; ``in_flight[i]`` requests spanning all of stage i."""
    stages = pd.DataFrame(
        {"stage": range(4), "warmup_end_unix_s": [0.0, 1, 2, 3],
         "measure_end_unix_s": [1.0, 2, 3, 4]}
    )  # fmt: skip
    spans = [(i, i + 1.0) for i, n in enumerate(in_flight) for _ in range(n)]
    requests = pd.DataFrame(spans, columns=["start_unix_s", "end_unix_s"])
    return SimpleNamespace(run_info={"curve": CURVE}, stages=stages, requests=requests)


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
    assert "did NOT follow" in got.text and "window 3" in got.text and "fell behind" in got.text


def _analysis(verdicts: list[str]) -> SimpleNamespace:
    stages = [
        SimpleNamespace(stage=w["stage"], target_users=w["target_users"], verdict=v)
        for w, v in zip(WINDOWS, verdicts, strict=True)
    ]
    return SimpleNamespace(
        run=SimpleNamespace(run_info={"curve": CURVE}), knee=SimpleNamespace(stages=stages)
    )


def test_the_first_window_past_the_knee_names_its_scale_and_minute() -> None:
    got = replay_break(_analysis(["comfortable", "comfortable", "comfortable", "knee"]))  # type: ignore[arg-type]
    assert got is not None and got.breaking_scale == 2.0 and got.stage == 3
    assert got.held == (1.0,) and got.log_start_s == 1060.0
    assert "×2 breaks first, at minute 1 of the log" in got.text


def test_a_window_above_what_the_run_allows_breaks_too() -> None:
    allows = Capacity(3, "knee", "the knee allows 3", "r")
    got = replay_break(_analysis(["comfortable"] * 4), allows)  # type: ignore[arg-type]
    assert got is not None and got.stage == 1 and got.breaking_scale == 1.0 and got.held == ()


def test_no_window_past_the_knee() -> None:
    got = replay_break(_analysis(["comfortable"] * 4))  # type: ignore[arg-type]
    assert got is not None and got.breaking_scale is None and got.held == (1.0, 2.0)
