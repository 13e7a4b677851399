"""Where the tests' own files are: the repository, the helpers, child programs and data."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
REPO = SUPPORT.parent.parent
PROGRAMS = SUPPORT / "programs"
DATA = SUPPORT / "data"
