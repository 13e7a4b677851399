"""The judgement never imports the layer that words it.

:mod:`analysis.knee` returns facts (signals, stage reasons, the summary, the fit, the confidence)
and :mod:`analysis.advice` returns facts (the deploy answer, each setting's reason, each setting
withheld), and so do :mod:`analysis.diagnosis` (each bottleneck rule's reading, a stage's
failures) and the stages and SLO packages; :mod:`analysis.report` words them. An import the
other way, even one inside a function, would let a sentence back into the judgement, so every
import statement of those packages is read.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: package → the packages it must never import
FORBIDDEN = {
    package: ("analysis.report",)
    for package in (
        "analysis/knee",
        "analysis/advice",
        "analysis/diagnosis",
        "analysis/slo",
        "analysis/stages",
        "analysis/predict",
    )
}
#: the commands that wire a judgement to its words (``loadknee predict`` prints the prediction)
WIRING = {"analysis/predict/cli.py"}


def imported(tree: ast.AST) -> list[tuple[int, str]]:
    """Every module an ``import`` or ``from … import`` in ``tree`` names, with its line (a
    ``from analysis import report`` counts as ``analysis.report``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def offenders(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.relative_to(ROOT).as_posix() not in WIRING
        for line, name in imported(ast.parse(path.read_text(encoding="utf-8")))
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    ]


def test_the_judgement_never_imports_the_report_layer() -> None:
    for package, forbidden in FORBIDDEN.items():
        found = offenders(package, forbidden)
        assert not found, "\n".join(found)


def test_the_scan_sees_every_spelling_of_the_import() -> None:
    source = (
        "import analysis.report.screen\n"
        "def f():\n    from analysis.report.knee_words import x\n"
        "from analysis import report\n"
        "from analysis import reporting\n"
        "from analysis.knee import facts\n"
    )
    lines = {
        line
        for line, name in imported(ast.parse(source))
        if name == "analysis.report" or name.startswith("analysis.report.")
    }
    assert lines == {1, 3, 4}  # not "reporting", not the knee's own facts
