"""Comments and docs say why in the product's words: no incident stories, no pointers to files
that are not in the repository (notes kept beside it, numbered seed documents)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import REPO

ROOT = REPO
#: what only a reader of the project's history or of files outside the repository understands
OUTSIDE = re.compile(
    r"DESIGN\.md|LOCUST-NOTES|PEERS\.md|STYLE\.md|Seen in CI|\(finding|\bfinding \d|vLLM chapter"
    r"|seed 00\d",
    re.IGNORECASE,
)
PLACES = (
    "loadknee_core",
    "analysis",
    "loadknee_locust",
    "locustfiles",
    "tests",
    "benchmarks",
    "docs",
    "README.md",
)
SOURCES = ROOT / "docs" / "method.md"  # its Sources section names the seed documents
ME = Path(__file__).resolve()


def test_no_incident_story_or_outside_file_in_code_and_docs() -> None:
    hits = []
    for place in PLACES:
        base = ROOT / place
        paths = [base] if base.is_file() else sorted(base.rglob("*"))
        for path in paths:
            if path.suffix not in (".py", ".md", ".js", ".html") or path.resolve() == ME:
                continue
            if "realengine" in path.parts:  # scripts copied in from outside, kept as they are
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if path == SOURCES:
                text = text.split("\n## Sources", 1)[0]
            for n, line in enumerate(text.splitlines(), 1):
                if OUTSIDE.search(line):
                    hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}")
    assert not hits, "\n".join(hits)
