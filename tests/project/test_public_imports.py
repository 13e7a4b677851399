"""The import paths locustfiles use (new and pre-layout) all name the same objects."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import PROGRAMS

PROGRAM = PROGRAMS / "public_imports.py"


def test_public_import_paths_resolve_to_one_object() -> None:
    done = subprocess.run(
        [sys.executable, str(PROGRAM)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
