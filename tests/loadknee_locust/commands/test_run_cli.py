"""``loadknee run``: the Locust command line it builds, its validation and its --help."""

from __future__ import annotations

import subprocess
import sys

import pytest

from loadknee_locust.commands import run as runcli
from tests.support.kept_out import imports_brought


def command(*argv: str) -> list[str]:
    args, unknown = runcli.build_parser().parse_known_args(list(argv))
    return runcli.locust_command(args, unknown)


def value(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_headless_command_carries_the_options() -> None:
    cmd = command(
        "--host", "http://h:1", "--levels", "1,2,4,8", "--stage-seconds", "90",
        "--no-stream", "--model", "m", "--llm-red-line-p95-ms", "5000", "--html", "r.html",
    )  # fmt: skip
    assert cmd[:3] == [sys.executable, "-m", "locust"]
    assert value(cmd, "-f").endswith("locustfiles/default.py")
    assert value(cmd, "--llm-levels") == "1,2,4,8"
    assert value(cmd, "--llm-stage-seconds") == "90"
    assert value(cmd, "--llm-model") == "m"
    assert "--llm-no-stream" in cmd and "--headless" in cmd
    assert value(cmd, "--stop-timeout") == "120"
    assert value(cmd, "--exit-code-on-error") == "0"
    assert value(cmd, "--llm-red-line-p95-ms") == "5000"  # the plugin's spelling, taken too
    assert value(cmd, "--html") == "r.html"  # unknown options pass through
    assert "--llm-warmup-seconds" not in cmd  # not given: the plugin's default applies


def test_workers_web_and_count_mode() -> None:
    cmd = command("--host", "http://h", "--workers", "2", "--web", "--stage-requests", "40")
    assert value(cmd, "--processes") == "2"
    assert value(cmd, "--master-bind-port") == value(cmd, "--master-port")
    assert "--headless" not in cmd and value(cmd, "--web-port") == "8089"
    assert value(cmd, "--llm-stage-requests") == "40"


@pytest.mark.parametrize(
    ("argv", "probe"),
    [
        ([], True),
        (["--no-calibrate"], False),
        (["--llm-no-calibrate"], False),  # the plugin's spelling, taken by the wrapper
        (["--no-concurrency-probe"], False),
        (["--", "--llm-no-calibrate"], False),  # after '--': Locust's, seen all the same
    ],
)
def test_the_concurrency_probe_is_skipped_by_either_flag(argv: list[str], probe: bool) -> None:
    raw = ["--host", "http://h", *argv]
    cut = raw.index("--") if "--" in raw else len(raw)
    args, unknown = runcli.build_parser().parse_known_args(raw[:cut])
    passed = [*unknown, *raw[cut + 1 :]]  # as main() hands both on
    assert runcli.wants_concurrency_probe(args, passed) is probe
    # only the probe: the calibration (Locust's side) stays unless --no-calibrate says so
    calibrates = "--llm-no-calibrate" not in runcli.locust_command(args, passed)
    assert calibrates is ("calibrate" not in " ".join(argv))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--levels", "1,2"], "--host is required"),
        (["--host", "http://h", "--levels", "1,x"], "levels"),
        (["--host", "http://h", "--processes", "-2"], "--processes"),
        (["--host", "http://h", "--workers", "-2"], "--processes"),  # the alias, named as Locust's
    ],
)
def test_bad_input_is_a_clear_error(argv: list[str], message: str, capsys) -> None:
    assert runcli.main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "processes", "limit"),
    [
        (["--processes", "2"], "2", None),  # Locust's name, the primary spelling
        (["--workers", "2"], "2", None),  # the old name, an alias
        (["--processes", "-1"], "-1", None),  # as Locust: one per CPU core
        (["--run-time", "90"], None, "90"),
        (["--run-time", "2.5"], None, "2.5"),
        (["--run-time", "5m"], None, "300"),  # Locust's forms
        (["--run-time", "1h30m10s"], None, "5410"),
        (["--time-limit", "300"], None, "300"),  # the old name, an alias
    ],
)
def test_locust_names_and_their_aliases(
    argv: list[str], processes: str | None, limit: str | None
) -> None:
    cmd = command("--host", "http://h", *argv)
    assert (value(cmd, "--processes") if "--processes" in cmd else None) == processes
    assert (value(cmd, "--llm-time-limit") if "--llm-time-limit" in cmd else None) == limit
    assert "--run-time" not in cmd  # the wrapper's time limit reaches the plugin as its own


def test_a_run_time_locust_would_refuse_is_an_argument_error(capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as stopped:
        runcli.main(["--host", "http://h", "--run-time", "5x"])
    assert stopped.value.code == 2
    # words are the product: the message a user reads for bad input
    assert "--run-time/--time-limit: invalid time span value: '5x'" in capsys.readouterr().err


def test_help_shows_the_locust_name_first() -> None:
    text = " ".join(runcli.build_parser().format_help().split())
    # words are the product: the --help a user reads
    assert "--processes N, --workers N" in text and "--run-time TIME, --time-limit TIME" in text


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("[2026-12-05 10:00:00,000] vm/INFO/loadknee: loadknee progress: stage 1/2 (1 user) "
         "measure | 3 requests, 0 errors | 9 s left",
         "[loadknee] stage 1/2 (1 user) measure | 3 requests, 0 errors | 9 s left"),
        ("[2026-12-05 10:00:00,000] vm/INFO/loadknee: loadknee sweep: sweep over: x",
         "[loadknee] sweep over: x"),
        ("[2026-12-05 10:00:00,000] vm/WARNING/loadknee: loadknee: no GPU telemetry", None),
        # the sweep's own announcements (a stop on a signal, the red line) are progress
        ("[2026-12-05 10:00:00,000] vm/WARNING/loadknee: loadknee sweep: SIGINT: stopping the "
         "sweep", "[loadknee] SIGINT: stopping the sweep"),
        ("[2026-12-05 10:00:00,000] vm/INFO/locust.main: Starting Locust 2.0", None),
        ("[2026-12-05 10:00:00,000] vm/ERROR/loadknee: loadknee: cannot run the sweep: x",
         "[2026-12-05 10:00:00,000] vm/ERROR/loadknee: loadknee: cannot run the sweep: x"),
        ("Traceback (most recent call last):", "Traceback (most recent call last):"),
    ],
)  # fmt: skip
def test_what_the_terminal_shows_of_locusts_output(line: str, shown: str | None) -> None:
    assert runcli.OutputFilter(verbose=False).show(line) == shown
    assert runcli.OutputFilter(verbose=True).show(line) == (shown or line)


def test_locusts_lines_go_to_each_run_directorys_log(tmp_path) -> None:  # type: ignore[no-untyped-def]
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    lines = [
        "[t] vm/INFO/locust.main: Starting",
        f"[t] vm/INFO/loadknee: loadknee: run directory {first}",
        "[t] vm/WARNING/loadknee: loadknee: slow",
        f"[t] vm/INFO/loadknee: loadknee: run directory {second}",
        "Type     Name   # reqs",
        "a plain line of the closing tables",
    ]
    output = runcli.OutputFilter(verbose=False)
    shown = [output.show(line) for line in lines]
    assert shown == [None] * 6  # the tables too: they opened with their header
    assert output.run_dirs == [str(first), str(second)] and output.hidden_warnings == 1
    assert runcli.write_locust_logs(output) == [
        str(first / "locust.log"),
        str(second / "locust.log"),
    ]
    assert (first / "locust.log").read_text().splitlines() == lines[:3]
    assert (second / "locust.log").read_text().splitlines() == lines[3:]


def test_help_all_lists_the_plugin_options_once_each() -> None:
    text = subprocess.run(
        [sys.executable, "-m", "loadknee_locust", "run", "--help-all"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for flag in ("--stage-seconds", "--prompt-log", "--red-line-p95-ms", "--knee-flat-gain"):
        assert flag in text
    for flag in ("--llm-levels", "--llm-prompt-log", "--llm-red-line-p95-ms"):  # the short one
        assert flag not in text
    # the wrapper keeps gevent out
    assert imports_brought("loadknee_locust.commands.run", "gevent,locust") == []


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
