"""``loadknee run``: the Locust command line it builds, its validation and its --help."""

from __future__ import annotations

import subprocess
import sys

import pytest

from loadknee_locust.commands import run as runcli
from tests.support.paths import PROGRAMS

KEPT_OUT = PROGRAMS / "imports_kept_out.py"  # no heavy imports


def command(*argv: str) -> list[str]:
    args, unknown = runcli.build_parser().parse_known_args(list(argv))
    return runcli.locust_command(args, unknown)


def value(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_headless_command_carries_the_options() -> None:
    cmd = command(
        "--host", "http://h:1", "--levels", "1,2,4,8", "--stage-seconds", "90",
        "--no-stream", "--model", "m", "--llm-red-line-p95-ms", "5000",
    )  # fmt: skip
    assert cmd[:3] == [sys.executable, "-m", "locust"]
    assert value(cmd, "-f").endswith("locustfiles/default.py")
    assert value(cmd, "--llm-levels") == "1,2,4,8"
    assert value(cmd, "--llm-stage-seconds") == "90"
    assert value(cmd, "--llm-model") == "m"
    assert "--llm-no-stream" in cmd and "--headless" in cmd
    assert value(cmd, "--stop-timeout") == "120"
    assert value(cmd, "--exit-code-on-error") == "0"
    assert value(cmd, "--llm-red-line-p95-ms") == "5000"  # unknown options pass through
    assert "--llm-warmup-seconds" not in cmd  # not given: the plugin's default applies


def test_workers_web_and_count_mode() -> None:
    cmd = command("--host", "http://h", "--workers", "2", "--web", "--stage-requests", "40")
    assert value(cmd, "--processes") == "2"
    assert value(cmd, "--master-bind-port") == value(cmd, "--master-port")
    assert "--headless" not in cmd and value(cmd, "--web-port") == "8089"
    assert value(cmd, "--llm-stage-requests") == "40"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--levels", "1,2"], "--host is required"),
        (["--host", "http://h", "--levels", "1,x"], "levels"),
        (["--host", "http://h", "--workers", "-1"], "--workers"),
    ],
)
def test_bad_input_is_a_clear_error(argv: list[str], message: str, capsys) -> None:
    assert runcli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_help_lists_the_plugin_options() -> None:
    text = subprocess.run(
        [sys.executable, "-m", "loadknee_locust", "run", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for flag in ("--stage-seconds", "--llm-levels", "--llm-red-line-p95-ms", "--llm-prompt-log"):
        assert flag in text
    imported = subprocess.run(
        [sys.executable, str(KEPT_OUT), "loadknee_locust.commands.run", "gevent,locust"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert imported.stdout.strip() == "[]"  # the wrapper keeps gevent out


def test_explain_stays_with_the_wrapper_and_reaches_the_next_command() -> None:
    """``run --explain``: not a Locust option; the analyze command printed at the end asks for
    every reason."""
    cmd = command("--host", "http://h:1", "--explain")
    assert "--explain" not in cmd
    args, _ = runcli.build_parser().parse_known_args(["--host", "http://h:1", "--explain"])
    assert args.explain
    shown = runcli.analyze_command("runs/x", explain=True).split()
    assert shown[-3:] == ["analyze", "runs/x", "--explain"]
    assert runcli.analyze_command("runs/x").split()[-2:] == ["analyze", "runs/x"]
