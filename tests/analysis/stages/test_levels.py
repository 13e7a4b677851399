"""The one level-stage selector: grid and refine stages, never the baseline; and no second one."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.stages.levels import level_mask, level_rows
from tests.support.paths import REPO

HOME = REPO / "analysis" / "stages" / "levels.py"


def test_levels_are_step_and_refine_stages_in_frame_order() -> None:
    frame = pd.DataFrame(
        {"stage": [0, 1, 2, 3, 4], "kind": ["baseline", "step", "refine", "step", None]}
    )
    assert level_mask(frame).tolist() == [False, True, True, True, False]
    assert level_rows(frame)["stage"].tolist() == [1, 2, 3]
    assert level_rows(frame.iloc[0:0]).empty


def test_a_frame_without_kinds_is_all_levels() -> None:
    frame = pd.DataFrame({"stage": [0, 1]})
    assert level_mask(frame).dtype == np.bool_ and level_mask(frame).all()
    assert level_rows(frame) is frame


def _other_selectors(path: Path) -> list[int]:
    """Lines of ``path`` that pick level stages by themselves: the kinds' constant, a literal
    holding both level kinds, or ``kind != "baseline"``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name) and node.id == "LEVEL_KINDS":
            found.append(node.lineno)
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            strings = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            if {"step", "refine"} <= strings:
                found.append(node.lineno)
        elif (
            isinstance(node, ast.Compare)
            and _is_kind(node.left)
            and any(isinstance(o, ast.NotEq) for o in node.ops)
            and any(isinstance(c, ast.Constant) and c.value == "baseline" for c in node.comparators)
        ):
            found.append(node.lineno)
    return found


def _is_kind(node: ast.expr) -> bool:
    """``frame["kind"]`` or ``row.kind``."""
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    return isinstance(node, ast.Attribute) and node.attr == "kind"


def test_no_module_of_the_analysis_selects_levels_its_own_way() -> None:
    others = {
        f"{path.relative_to(REPO)}:{line}"
        for path in sorted((REPO / "analysis").rglob("*.py"))
        if path != HOME
        for line in _other_selectors(path)
    }
    assert others == set(), others
    assert _other_selectors(HOME), "the selector's own module reads the kinds"
