"""Which heavy packages an import brings along, asked of a fresh child process.

The test process has long imported everything, so "importing X keeps locust out" is asked of a
child that runs ``tests/support/programs/imports_kept_out.py``; every such test goes through
:func:`imports_brought` and asserts on the list it returns.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.paths import PROGRAMS

KEPT_OUT = PROGRAMS / "imports_kept_out.py"


def imports_brought(modules: str, forbidden: str, timeout_s: float = 60.0) -> list[str]:
    """The packages of ``forbidden`` (comma-separated) that importing ``modules``
    (comma-separated) in a fresh interpreter loaded; a child that failed is an AssertionError."""
    proc = subprocess.run(
        [sys.executable, str(KEPT_OUT), modules, forbidden],
        capture_output=True, text=True, timeout=timeout_s,
    )  # fmt: skip
    try:
        found = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"the import child failed: {proc.stdout}{proc.stderr}") from None
    assert proc.returncode == (1 if found else 0), proc.stdout + proc.stderr
    return list(found)
