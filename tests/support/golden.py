"""One home for the golden-file check of the words tests (``tests/analysis/report/test_golden_*``).

Each golden test renders its words to one text and holds it to a committed file under
``tests/support/data/golden/``; ``LOADKNEE_UPDATE_GOLDEN=1`` rewrites the file from the text
instead, for a rewording that is meant (review the diff). The check lives here once so that
every golden test reads, rewrites and reports the same way.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.paths import DATA

#: the folder of the committed golden files
GOLDEN = DATA / "golden"
#: whether this run rewrites the golden files rather than checking them
UPDATE = os.environ.get("LOADKNEE_UPDATE_GOLDEN") == "1"


def check_golden(name: str, text: str) -> Path:
    """Hold ``text`` to the golden file ``name`` (rewritten first under ``UPDATE``); returns its
    path."""
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"no golden file {path}: run with LOADKNEE_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), (
        f"{name} changed: if intended, rerun with LOADKNEE_UPDATE_GOLDEN=1 and review the diff"
    )
    return path
