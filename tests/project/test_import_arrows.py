"""The arrows between modules point one way: no import circle, and three layers.

``loadknee_core`` (stdlib only: the run-directory contract, the intervals, the knee's parameters,
the SLO parser …) is at the bottom; ``analysis`` and ``loadknee_locust`` both stand on it and
import nothing of each other, except the ``loadknee`` commands listed in
:data:`LOCUST_TO_ANALYSIS`, which run an analysis. Every import statement counts, the ones inside
a function and the ones under ``if TYPE_CHECKING:`` too: a circle of annotations still ties two
modules into one (``tests/support/import_graph.py`` reads them; run it as a module for the
graph's numbers).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from tests.support.import_graph import (
    KINDS,
    Arrow,
    arrows,
    module_circles,
    module_names,
    package,
    statements,
)

#: the only modules of loadknee_locust that import analysis, and why: each is a ``loadknee``
#: command whose job is to run the analysis (every other one starts ``loadknee analyze`` or
#: ``python -m analysis.live.answer`` as a child process, and imports nothing of it)
LOCUST_TO_ANALYSIS = {
    "loadknee_locust.commands.verify": "loadknee verify re-runs the analysis of a run directory "
    "and compares it with the original's answer (analysis.pipeline, analysis.compare.verify)",
}

ARROWS = arrows()
#: what loadknee_core never imports, not even inside a function
NEVER_BELOW = frozenset({"analysis", "loadknee_locust", "locust", "gevent"})


def _listed(found: list[Arrow]) -> str:
    return "\n".join(f"{a.source}:{a.line} -> {a.target} ({a.kind})" for a in found)


def test_no_import_circle() -> None:
    circles = module_circles(ARROWS, KINDS)
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_analysis_imports_nothing_of_loadknee_locust() -> None:
    """analysis stands on loadknee_core alone (no locust, no gevent: and no room of the Locust
    side either, however pure)."""
    found = [a for a in ARROWS if package(a.source) == "analysis" != package(a.target)]
    assert found, "the graph lost analysis's arrows to loadknee_core"
    assert not [a for a in found if package(a.target) != "loadknee_core"], _listed(
        [a for a in found if package(a.target) != "loadknee_core"]
    )


def test_only_the_listed_commands_import_analysis() -> None:
    found = [
        a
        for a in ARROWS
        if package(a.source) == "loadknee_locust"
        and package(a.target) == "analysis"
        and a.source not in LOCUST_TO_ANALYSIS
    ]
    assert not found, _listed(found)
    importing = {a.source for a in ARROWS if package(a.target) == "analysis"}
    assert set(LOCUST_TO_ANALYSIS) <= importing, "a listed module no longer imports analysis"


def test_the_bottom_loads_only_itself_and_the_standard_library() -> None:
    """At import, loadknee_core loads the standard library alone; a function may load one of the
    dependencies both sides have (pandas, PyYAML, prometheus_client) when called, never locust,
    gevent or either package above it."""
    outside = []
    for name, path in module_names().items():
        if package(name) != "loadknee_core":
            continue
        for node, kind in statements(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            outside += [
                f"{name}:{node.lineno} imports {top} ({kind})"
                for top in tops
                if top in NEVER_BELOW
                or (kind == "module" and top not in sys.stdlib_module_names | {"loadknee_core"})
            ]
    assert not outside, "\n".join(outside)


def test_the_graph_sees_every_kind_of_circle(tmp_path: Path) -> None:
    """The reader finds a circle closed by a function's import or an annotation's, and none
    where the arrows point one way."""
    for package_name in ("analysis", "loadknee_locust", "loadknee_core"):
        (tmp_path / package_name).mkdir()
        (tmp_path / package_name / "__init__.py").write_text("")
    (tmp_path / "analysis" / "a.py").write_text("from analysis import b\n")
    (tmp_path / "analysis" / "b.py").write_text("def f():\n    from analysis.a import x\n")
    (tmp_path / "analysis" / "c.py").write_text("from .d import y\n")
    (tmp_path / "analysis" / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from analysis import c\n"
    )
    (tmp_path / "analysis" / "e.py").write_text("import loadknee_core\nfrom analysis import a\n")
    found = arrows(tmp_path)
    kinds = {(a.source, a.target): a.kind for a in found}
    assert kinds[("analysis.b", "analysis.a")] == "function"
    assert kinds[("analysis.d", "analysis.c")] == "typing"
    assert kinds[("analysis.c", "analysis.d")] == "module"
    assert module_circles(found, KINDS) == [
        ["analysis.a", "analysis.b"],
        ["analysis.c", "analysis.d"],
    ]
    assert module_circles(found, ("module",)) == []
