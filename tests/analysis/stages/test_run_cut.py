"""``analysis.stages.run_cut``: a cut run is named with where it stopped; a complete one is not."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.stages.run_cut import run_cut


def _stages(*rows: tuple[int, str, int, float, float, str]) -> pd.DataFrame:
    cols = ["stage", "kind", "target_users", "warmup_end_unix_s", "measure_end_unix_s"]
    return pd.DataFrame([r[:5] for r in rows], columns=cols).assign(
        stop_reason=[r[5] for r in rows]
    )


TWO = _stages((0, "step", 1, 10.0, 70.0, "duration"), (1, "step", 2, 81.0, 93.0, "interrupted"))


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        ({"stop_reason": "duration", "end_unix_s": 200.0}, None),
        ({"stop_reason": "red_line", "end_unix_s": 200.0}, None),
        ({"stop_reason": "time_limit", "end_unix_s": 200.0}, None),
        ({"stop_reason": "interrupted", "end_unix_s": 95.0, "levels": [1, 2, 4, 8]},
         ("interrupted", 1, 2, (4, 8))),
        ({"start_unix_s": 1.0, "end_unix_s": None, "levels": [1, 2]}, ("killed", 1, 2, ())),
        ({"run_id": "typed-in"}, None),
    ],
)  # fmt: skip
def test_cut_or_not(info: dict, expected: tuple | None) -> None:
    cut = run_cut(info, TWO)
    if expected is None:
        assert cut is None
        return
    assert cut is not None
    assert (cut.reason, cut.stage, cut.users, cut.levels_not_run) == expected
    assert cut.measured_s == pytest.approx(12.0)


def test_cut_before_any_stage_closed() -> None:
    info = {"stop_reason": "interrupted", "end_unix_s": 5.0, "levels": [1, 2]}
    cut = run_cut(info, TWO[:0])
    assert cut is not None and cut.stage is None and cut.levels_not_run == (1, 2)
