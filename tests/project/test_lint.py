"""ruff (lint and format) and mypy are clean on the repository, run as part of the test suite.

Why a test: CI runs exactly the README's test command (``.ci/run``), so the checks ride in it
instead of in a second command that the README would have to repeat. Each runs from the
interpreter running the tests (``python -m``: the venv's own ruff and mypy, the versions the
``test`` extra pins) with the repository as its working directory, so it reads pyproject.toml's
settings; a failure shows the tool's own report.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import REPO

REPO = REPO

CHECKS = {
    "ruff check": ["ruff", "check", "."],
    "ruff format --check": ["ruff", "format", "--check", "."],
    "mypy": ["mypy"],  # the packages come from [tool.mypy] in pyproject.toml
}


@pytest.mark.parametrize("name", list(CHECKS))
def test_repository_is_clean(name: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", *CHECKS[name]],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"{name} found problems:\n{proc.stdout}{proc.stderr}"
