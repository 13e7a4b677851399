"""docs/architecture.md is a map of every module: each one is named in its room's table row."""

from __future__ import annotations

import re

from tests.support.paths import REPO

ROOT = REPO
MAP = ROOT / "docs" / "architecture.md"
PACKAGES = ("loadknee_core", "loadknee_locust", "analysis")
SKIPPED = {"__init__.py", "__main__.py"}  # a package or its entry point, not a module of a room


def modules(package: str) -> set[str]:
    """Every module of ``package`` as a path relative to it (``plugin/judge``), tests left out."""
    base = ROOT / package
    return {
        path.relative_to(base).with_suffix("").as_posix()
        for path in base.rglob("*.py")
        if path.name not in SKIPPED and not path.name.startswith("test")
    }


def mapped(package: str) -> set[str]:
    """The modules the map's table for ``package`` names, with their room (``plugin/judge``)."""
    text = MAP.read_text(encoding="utf-8")
    section = text.split(f"## Module map: `{package}/`", 1)[1].split("\n## ", 1)[0]
    found: set[str] = set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("room", "---"):
            continue
        room = re.match(r"`([\w/]+/)`", cells[0])
        prefix = room.group(1) if room else ""  # "(top, …)" rooms hold top-level modules
        found |= {prefix + name for name in re.findall(r"`(\w+)`", cells[1])}
    return found


def test_every_module_is_on_the_map() -> None:
    for package in PACKAGES:
        missing = sorted(modules(package) - mapped(package))
        assert not missing, f"docs/architecture.md does not name {package}: {missing}"


def test_the_map_names_no_module_that_is_gone() -> None:
    for package in PACKAGES:
        stale = sorted(mapped(package) - modules(package))
        assert not stale, f"docs/architecture.md names modules {package} lacks: {stale}"


def test_the_tests_tree_mirrors_the_code() -> None:
    """Each folder of unit tests is a room of the code; no test file sits outside the tree."""
    tests = ROOT / "tests"
    assert not sorted(p.name for p in tests.glob("test_*.py")), "a test file flat in tests/"
    for package in PACKAGES:
        for folder in sorted((tests / package).rglob("*")):
            if folder.is_dir() and folder.name != "__pycache__":
                room = ROOT / package / folder.relative_to(tests / package)
                assert room.is_dir(), f"{folder.relative_to(ROOT)} mirrors no room of {package}"
    expected = {
        "analysis",
        "loadknee_core",
        "loadknee_locust",
        "e2e",
        "realengine",
        "project",
        "support",
    }
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == expected, f"tests/ holds {sorted(folders)}; expected {sorted(expected)}"
