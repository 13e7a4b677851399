"""A wrong input costs one line: each command, given a bad flag, value, file or host, prints one
line on stderr that names it and what to do, exits 2 with no traceback and no usage, and writes
nothing (issue 41). Each case runs the real ``loadknee`` entry point in a child process, from an
empty folder; the hosts are loopback servers of this test (port 0).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.loopback_http import QuietHandler, loopback_server

PAGE = b"<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head><body>" + b"x" * 400


class FakeSite(QuietHandler):
    """``/v1/models`` as an LLM server answers it; ``/site/…`` a web page; the rest a JSON 404
    (as vLLM's FastAPI answers an unknown path)."""

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self.send_body(200, b'{"data": [{"id": "m"}]}', "application/json")
        elif self.path.startswith("/site/"):
            self.send_body(200, PAGE, "text/html")
        else:
            self.send_body(404, b'{"detail": "Not Found"}', "application/json")


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with loopback_server(FakeSite) as url:
        yield url


#: (id, arguments with {inputs} and {site} to fill, words the one line must hold)
CASES = [
    ("misspelt-flag", ["analyze", "{inputs}/run", "--knee-flat-gain-ratio", "0.1"],
     ["--knee-flat-gain-ratio", "did you mean --knee-flat-gain?", "loadknee analyze -h for help"]),
    ("file-for-a-dir", ["analyze", "{inputs}/requests.csv"],
     ["requests.csv is a file, not a run directory"]),
    ("missing-dir", ["analyze", "{inputs}/nosuch"], ["no such run directory"]),
    ("binary-trace", ["trace", "{inputs}/capture.bin"],
     ["capture.bin", "binary", "nothing written"]),
    ("web-page-host", ["run", "--host", "{site}/site", "--levels", "1"],
     ["web page", "not an OpenAI-compatible LLM API", "--host"]),
    ("v1-host", ["run", "--host", "{site}/v1", "--levels", "1"],
     ["HTTP 404", "drop the /v1 from --host", "--host {site}"]),
    ("plugin-option-unknown", ["run", "--host", "{site}", "--llm-ignore-eos"],
     ["unknown option --llm-ignore-eos", "did you mean --no-ignore-eos?"]),
    ("bad-number", ["run", "--host", "{site}", "--stage-seconds", "abc"],
     ["--stage-seconds", "'abc'"]),
    ("one-run-to-compare", ["compare", "{inputs}/run"], ["at least two run directories"]),
    ("unknown-example", ["init", "proj", "--example", "nosuch"], ["--example", "invalid choice"]),
    ("unknown-command", ["anaylze", "{inputs}/run"], ["unknown command", "did you mean analyze?"]),
]  # fmt: skip


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    folder = tmp_path / "inputs"
    (folder / "run").mkdir(parents=True)
    (folder / "requests.csv").write_text("request_id,stage\n1,1\n")
    (folder / "capture.bin").write_bytes(bytes(range(256)) * 8)
    return folder


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(("args", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_input_costs_one_line(
    args: list[str], words: list[str], inputs: Path, site: str, tmp_path: Path
) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    before = _tree(inputs)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCUST_", "LOADKNEE_"))}
    filled = [a.format(inputs=inputs, site=site) for a in args]
    done = subprocess.run(
        [sys.executable, "-m", "loadknee_locust", *filled],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and "usage:" not in done.stderr
    for word in words:
        assert word.format(site=site) in lines[0]
    assert done.stdout == ""
    assert list(cwd.iterdir()) == [], "a failed input wrote something"
    assert _tree(inputs) == before


def test_the_table_covers_ten_inputs_and_every_kind_of_error() -> None:
    assert len(CASES) >= 10
    commands = {c[1][0] for c in CASES}
    assert {"analyze", "trace", "run", "compare", "init"} <= commands


def test_a_close_spelling_is_offered_and_a_far_one_is_not() -> None:
    from loadknee_core.command_parser import CommandParser

    parser = CommandParser(prog="p")
    parser.add_argument("--stage-seconds")
    # words are the product: the hint a user reads for a mistyped option
    assert parser.hint("unrecognized arguments: --stage-second") == (
        "unknown option --stage-second (did you mean --stage-seconds?)"
    )
    # words are the product: the hint a user reads for a mistyped option
    assert parser.hint("unrecognized arguments: --zzz") == "unknown option --zzz"
    # words are the product: the hint a user reads for a mistyped option
    assert parser.hint("unrecognized arguments: --zzz 3") == "unknown option --zzz"
    # words are the product: the hint a user reads for a mistyped option
    assert parser.hint("unrecognized arguments: extra") == "unexpected argument extra"
    # words are the product: the hint a user reads for a mistyped option
    assert parser.hint("argument --x: bad") == "argument --x: bad"
