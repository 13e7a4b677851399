"""``docs/reference.md`` is generated from the parsers: a stale page fails, naming the fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loadknee_locust.commands import reference
from loadknee_locust.commands.cli import SUBCOMMANDS
from loadknee_locust.plugin.options import option_specs
from tests.support.paths import REPO

PAGE = REPO / "docs" / "reference.md"


@pytest.fixture
def generated(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "100")
    return reference.reference_text()


def test_reference_page_is_current(generated: str) -> None:
    assert PAGE.read_text(encoding="utf-8") == generated, (
        f"docs/reference.md is stale: regenerate it with `{reference.REGENERATE}`"
    )


def test_every_command_and_every_llm_option_is_listed(generated: str) -> None:
    for name in SUBCOMMANDS:
        assert f"\n## loadknee {name}\n" in generated, name
    for spec in option_specs():
        assert f"| `{spec.flag}` | `{spec.env_var}` |" in generated, spec.flag
    for flag in ("--nvidia-smi-csv", "--labels", "--max-num-seqs", "--workers", "--force"):
        assert f"`{flag}`" in generated, flag


def test_the_page_names_no_seed_document(generated: str) -> None:
    """User-facing text names the rule in plain words, never the source document's number."""
    assert "seed 0" not in generated.lower()


def test_check_mode_reports_a_stale_page_and_the_command(tmp_path: Path) -> None:
    page = tmp_path / "reference.md"
    page.write_text("# old\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "loadknee_locust.commands.reference", "--check", str(page)]
    stale = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert stale.returncode == 1 and reference.REGENERATE in stale.stderr
    write = subprocess.run([*cmd[:-2], str(page)], capture_output=True, text=True, timeout=120)
    assert write.returncode == 0, write.stderr
    assert page.read_text(encoding="utf-8") == PAGE.read_text(encoding="utf-8")
