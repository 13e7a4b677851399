"""The import graph of ``analysis`` and ``loadknee_locust``, read from the source with :mod:`ast`.

Every ``import`` and ``from … import`` statement is an arrow from its module to the module it
names (``from a.b import c`` points at ``a.b.c`` when that is a module, else at ``a.b``). Each
arrow is one of three kinds: ``module`` (runs when the module is imported), ``function`` (inside
a function body: runs when the function is called) and ``typing`` (under ``if TYPE_CHECKING:``:
never runs). A circle of ``module`` arrows is the one that can break an import; the others
still tie the two ends together and are counted beside it.

Run ``python -m tests.support.import_graph`` for the numbers.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import REPO

PACKAGES = ("loadknee_core", "analysis", "loadknee_locust")
KINDS = ("module", "function", "typing")


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    kind: str  # one of KINDS
    line: int


def module_names(root: Path = REPO) -> dict[str, Path]:
    """Every module of :data:`PACKAGES` by dotted name (a package by its own name)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def statements(tree: ast.AST, kind: str = "module") -> Iterable[tuple[ast.stmt, str]]:
    """Each import statement under ``tree`` with the kind of arrow it draws."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, kind
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from statements(node, "function" if kind == "module" else kind)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from statements(ast.Module(body=[child], type_ignores=[]), "typing")
            for child in node.orelse:
                yield from statements(ast.Module(body=[child], type_ignores=[]), kind)
        else:
            yield from statements(node, kind)


def arrows(root: Path = REPO) -> list[Arrow]:
    """Every arrow between two modules of :data:`PACKAGES`."""
    names = module_names(root)
    found = []
    for source, path in names.items():
        is_package = path.name == "__init__.py"
        for node, kind in statements(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    here = source.split(".") if is_package else source.split(".")[:-1]
                    here = here[: len(here) - (node.level - 1)]
                    base = ".".join(here + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in names else base)
            for target in targets:
                while target and target not in names:  # a name inside a module
                    target = target.rpartition(".")[0]
                if target and target != source:
                    found.append(Arrow(source, target, kind, node.lineno))
    return found


def circles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def room(module: str) -> str:
    """The room a module sits in: ``analysis.knee.find`` → ``analysis.knee``; a top-level module
    is its own room (``analysis.cli``)."""
    parts = module.split(".")
    return ".".join(parts[:2])


def package(module: str) -> str:
    return module.split(".")[0]


def module_circles(found: list[Arrow], kinds: tuple[str, ...] = ("module",)) -> list[list[str]]:
    return circles((a.source, a.target) for a in found if a.kind in kinds)


def grouped_circles(
    found: list[Arrow], key: Callable[[str], str], kinds: tuple[str, ...] = KINDS
) -> list[list[str]]:
    """The circles between groups of modules (rooms or packages), arrows inside a group left out."""
    return circles(
        (key(a.source), key(a.target))
        for a in found
        if a.kind in kinds and key(a.source) != key(a.target)
    )


def crossings(found: list[Arrow], source: str, target: str) -> Counter[tuple[str, str]]:
    """How often each ``(target module, kind)`` is imported from package ``source``."""
    return Counter(
        (a.target, a.kind)
        for a in found
        if package(a.source) == source and package(a.target) == target
    )


def main() -> None:
    found = arrows()
    print(f"{len(module_names())} modules, {len(found)} arrows: {Counter(a.kind for a in found)}")
    for label, kinds in (("module-level", ("module",)), ("all kinds", KINDS)):
        cs = module_circles(found, kinds)
        print(f"\nmodule circles ({label}): {len(cs)}")
        for c in cs:
            print("  " + " <-> ".join(c))
    for label, kinds in (("module-level", ("module",)), ("all kinds", KINDS)):
        cs = grouped_circles(found, room, kinds)
        print(f"\nroom circles ({label}): {len(cs)}")
        for c in cs:
            print("  " + " <-> ".join(c))
    print(f"\npackage circles (all kinds): {grouped_circles(found, package)}")
    for source, target in (("analysis", "loadknee_locust"), ("loadknee_locust", "analysis")):
        cross = crossings(found, source, target)
        print(f"\n{source} -> {target}: {sum(cross.values())} imports")
        for (module, kind), count in sorted(cross.items()):
            print(f"  {count:3d}  {module}  ({kind})")


if __name__ == "__main__":
    main()
