"""``loadknee predict``: exit codes, one-line errors, and the check command it prints."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from analysis.predict.cli import main
from loadknee_locust.commands.cli import main as loadknee
from tests.support.report_fixtures import write_run_dir


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run_dir(tmp_path_factory.mktemp("predict") / "run", slots=6)


def _check_command(out: str) -> list[str]:
    return shlex.split(next(line for line in out.splitlines() if "loadknee run" in line))


def test_predicts_and_prints_the_run_that_would_check_it(run: Path, capsys) -> None:
    assert main([str(run), "--input-tokens", "128", "--output-tokens", "64"]) == 0
    argv = _check_command(capsys.readouterr().out)
    assert argv[:2] == ["loadknee", "run"]
    flags = dict(zip(argv[2::2], argv[3::2], strict=True))
    assert (flags["--input-tokens"], flags["--output-tokens"]) == ("128", "64")
    assert "1" in flags["--levels"].split(",")


def test_is_a_loadknee_subcommand(run: Path, capsys) -> None:
    assert loadknee(["predict", str(run)]) == 0
    assert _check_command(capsys.readouterr().out)


def _one_line(err: str) -> bool:
    err = err.strip()
    return err.startswith("loadknee predict:") and "\n" not in err


def test_a_missing_run_directory_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path / "nope")]) == 2
    assert _one_line(capsys.readouterr().err)


@pytest.mark.parametrize("flag", ["--input-tokens", "--output-tokens"])
@pytest.mark.parametrize("value", ["0", "many", "nan"])
def test_a_bad_length_is_one_line_and_exit_2(run: Path, capsys, flag, value) -> None:
    with pytest.raises(SystemExit) as raised:
        main([str(run), flag, value])
    assert raised.value.code == 2
    assert _one_line(capsys.readouterr().err)
