"""The progress line's stage names: grid levels counted among the grid, refine stages apart."""

from __future__ import annotations

import pytest

from loadknee_core.contract import StageKind
from loadknee_locust.sweep.schedule import StagePlan, stage_label


def _stage(index: int, kind: StageKind, users: int) -> StagePlan:
    return StagePlan(index, kind, users, 0, 0.0, 16, 0.0)


# a baseline, a 1,4,16 grid, then two refine stages (the knee at 16, refined at 8 and 12)
STAGES = [
    _stage(0, "baseline", 1),
    _stage(1, "step", 1),
    _stage(2, "step", 4),
    _stage(3, "step", 16),
    _stage(4, "refine", 8),
    _stage(5, "refine", 12),
]


@pytest.mark.parametrize(
    ("index", "label"),
    [
        (0, "baseline"),
        (1, "stage 1/3"),
        (3, "stage 3/3"),
        (4, "refine stage 1"),  # was "stage 4", read as a grid that had grown
        (5, "refine stage 2"),
    ],
)
def test_each_stage_is_named_by_its_kind(index: int, label: str) -> None:
    assert stage_label(STAGES, index) == label


def test_a_grid_level_equal_to_another_stage_is_still_counted_by_position() -> None:
    twins = [_stage(0, "step", 2), _stage(1, "step", 2)]  # equal but for the index
    assert [stage_label(twins, i) for i in range(2)] == ["stage 1/2", "stage 2/2"]
