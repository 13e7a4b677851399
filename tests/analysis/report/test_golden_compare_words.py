"""Golden output: what ``loadknee compare`` reads into each kind of comparison (the
readings of :func:`analysis.compare.core.compare_runs` as
:mod:`analysis.report.compare_words` words them, and the side-by-side table's first
header), on the runs whose values tests/analysis/compare/test_compare.py asserts
(:mod:`tests.support.compare_cases`), in ``tests/support/data/golden/compare_words.txt``. When a
rewording is intended, regenerate it with the other golden files and review the diff:

    LOADKNEE_UPDATE_GOLDEN=1 python -m pytest -n 0 \\
        tests/analysis/report/test_golden_compare_words.py
"""

from __future__ import annotations

from analysis.compare.cli import wide_rows
from analysis.compare.core import Comparison, compare_runs
from analysis.report.compare_words import reading_lines
from tests.support.compare_cases import batch_sides, broken_after, compare_side, replay_sides
from tests.support.golden import check_golden


def _cases() -> dict[str, Comparison]:
    one = compare_side("x1", replicas=1)
    return {
        "benchmark vs replay": compare_runs(replay_sides()),
        "replicas, shared bottleneck": compare_runs(
            [compare_side("x2", tok_scale=1.3, replicas=2), one], kind="replicas"
        ),
        "replicas, near-linear": compare_runs(
            [compare_side("x2", tok_scale=1.95, replicas=2), one], kind="replicas"
        ),
        "replicas, counts unknown": compare_runs(
            [compare_side("a"), compare_side("b")], kind="replicas"
        ),
        "config, the table holds": compare_runs(
            [compare_side("before"), compare_side("after")], kind="config"
        ),
        "config, the table broke": compare_runs(
            [compare_side("before"), broken_after()], kind="config"
        ),
        "batch": compare_runs(batch_sides()),
        "prefix cache, little gain": compare_runs(
            [compare_side("off"), compare_side("on", tok_scale=1.02)], kind="prefix-cache"
        ),
    }


def _text() -> str:
    cases = _cases()
    lines = [
        f"{case}: {line}" for case, found in cases.items() for line in reading_lines(found.readings)
    ]
    lines += [
        f"table header, {case}: {wide_rows(cases[case])[0][0]}"
        for case in ("batch", "config, the table holds")
    ]
    return "\n".join(lines) + "\n"


def test_every_comparison_reading_has_its_golden_words() -> None:
    text = _text()
    check_golden("compare_words.txt", text)
