"""The guides and the README as a new user meets them: real flags, and the simulator blocks run.

* every flag on a ``loadknee …`` or ``locust …`` command line in a shell block of ``README.md``
  and ``docs/*.md``, in an inline code span of their prose, in sample output (``next: loadknee
  analyze …``), and in the Kubernetes manifests' container commands, exists in the parser that
  will read it (``loadknee run`` passes unknown options to Locust, so Locust's count there);
* every ``loadknee`` command of a shell block, run by a test or not, is accepted by its own
  parser (the right positionals, a value after each option that takes one);
* every flag named on its own in the prose (`` `--knee-tail p99` ``) is some command's (or one of
  the few engine flags the advice names, :data:`FOREIGN_FLAGS`);
* every shell block whose info string is ``sh sim`` (they target the simulator) runs as
  written with ``bash -eu -o pipefail`` in an empty folder, ``loadknee`` on PATH, each bounded in
  time. Where an unprivileged network namespace is available each block gets its own loopback,
  so the fixed port the guides use cannot meet another process's, and all blocks run at once
  from one fixture (their sweeps mostly wait on the simulator: the file then takes about as
  long as its longest block, not the sum); without one they run one after the other.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from loadknee_locust.commands.cli import SUBCOMMANDS
from tests.support.paths import PROGRAMS, REPO

ROOT = REPO
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
MANIFESTS = sorted((ROOT / "docs" / "k8s").glob("*.yaml"))
FLAGS_PROBE = PROGRAMS / "locust_flags_probe.py"
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.M | re.S)
BLOCK_TIMEOUT_S = 240.0


@functools.cache
def locust_flags() -> frozenset[str]:
    out = subprocess.run(
        [sys.executable, str(FLAGS_PROBE)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return frozenset(json.loads(out))


def command_flags(name: str) -> frozenset[str]:
    parser = importlib.import_module(SUBCOMMANDS[name][0]).build_parser()
    flags = {s for a in parser._actions for s in a.option_strings}
    return frozenset(flags | (locust_flags() if name == "run" else set()))


def shell_blocks(path: Path) -> list[tuple[int, str, str]]:
    """(line number, info string, body) of each shell code block."""
    text = path.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, m.start()) + 1, (m.group(1) + m.group(2)).strip(), m.group(3))
        for m in BLOCK.finditer(text)
        if m.group(1) in ("sh", "bash")
    ]


def command_lines(body: str) -> list[list[str]]:
    """Each command of a block as words (continuations joined, comments and placeholders out)."""
    joined = re.sub(r"\\\n", " ", body)
    commands = []
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        line = re.sub(r"<[^>]*>", "X", line).replace("[", " ").replace("]", " ")
        for part in re.split(r"&&|\|\||;|\||&(?!\d)", line):
            try:
                words = shlex.split(part)
            except ValueError:
                continue
            while words and (words[0] == "!" or ("=" in words[0] and words[0][0] != "-")):
                words = words[1:]
            if words:
                words[0] = os.path.basename(words[0])
                commands.append(words)
    return commands


def unknown_flags(words: list[str]) -> list[str]:
    if words[0] == "loadknee" and len(words) > 1 and words[1] in SUBCOMMANDS:
        known = command_flags(words[1])
    elif words[0] == "locust":
        known = locust_flags()
    else:
        return []
    flags = [w.split("=", 1)[0] for w in words if w.startswith("-") and w != "-"]
    return [f for f in flags if f not in known and f != "--"]


FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.M | re.S)
SPAN = re.compile(r"`([^`\n]+)`")
FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*[\w](?![\w*-])")
#: other programs' flags the docs name on their own (the engines' settings the advice spells)
FOREIGN_FLAGS = frozenset({
    "--parallel", "--metrics",  # llama.cpp's llama-server
    "--enable-metrics", "--max-running-requests",  # SGLang
    "--max-concurrent-requests",  # TGI
})  # fmt: skip


def spans(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of each inline code span in the prose (fenced blocks left out)."""
    text = path.read_text(encoding="utf-8")
    prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return [(prose.count("\n", 0, m.start()) + 1, m.group(1)) for m in SPAN.finditer(prose)]


def output_commands(path: Path) -> list[tuple[int, str]]:
    """(line number, command) of each ``loadknee …``/``locust …`` line in a block that is not a
    shell block (sample output: ``next: loadknee analyze …``, ``$ locust …``)."""
    text = path.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        if m.group(1).split()[:1] in (["sh"], ["bash"]):
            continue
        first = text.count("\n", 0, m.start(2)) + 1
        for i, line in enumerate(m.group(2).splitlines()):
            command = re.sub(r"^\s*(?:\$|next:)\s*", "", line)
            if command.startswith(("loadknee ", "locust ")):
                found.append((first + i, command))
    return found


def all_flags() -> frozenset[str]:
    """Every flag of every ``loadknee`` command and of Locust with the plugin."""
    return frozenset().union(*(command_flags(name) for name in SUBCOMMANDS), locust_flags())


def unknown_bare_flags(span: str) -> list[str]:
    """The flags of a code span that is not a command line (`--knee-tail p99`) that no command
    has; a span that starts with another program's name is that program's business."""
    first = span.split()[0] if span.split() else ""
    if not first.startswith("-"):
        return []
    return [f for f in FLAG.findall(span) if f not in all_flags() and f not in FOREIGN_FLAGS]


DOC_COMMANDS = [
    pytest.param(words, id=f"{path.name}:{line}:{' '.join(words[:2])}")
    for path in DOCS
    for line, body in [
        *((line, body) for line, _info, body in shell_blocks(path)),
        *((line, span) for line, span in spans(path) if span.startswith(("loadknee ", "locust "))),
        *output_commands(path),
    ]
    for words in command_lines(body)
    if words[0] in ("loadknee", "locust")
]
BARE_FLAGS = [
    pytest.param(span, id=f"{path.name}:{line}")
    for path in DOCS
    for line, span in spans(path)
    if FLAG.search(span) and span.startswith("-")
]


def test_the_docs_have_commands_to_check() -> None:
    assert len(DOC_COMMANDS) >= 15
    assert len(BARE_FLAGS) >= 50 and len(SHELL_COMMANDS) >= 30
    assert {p.values[0][1] for p in DOC_COMMANDS if p.values[0][0] == "loadknee"} >= {
        "run",
        "analyze",
        "compare",
        "sim",
    }


@pytest.mark.parametrize("words", DOC_COMMANDS)
def test_doc_command_flags_exist(words: list[str]) -> None:
    assert unknown_flags(words) == [], " ".join(words)


SHELL_COMMANDS = [
    pytest.param(words, id=f"{path.name}:{line}:{' '.join(words[:2])}")
    for path in DOCS
    for line, _info, body in shell_blocks(path)
    for words in command_lines(body)
    if words[0] == "loadknee" and len(words) > 1 and words[1] in SUBCOMMANDS
]


def parse_problem(words: list[str]) -> str | None:
    """What the command's own parser says of a ``loadknee`` command line (None: it parses;
    ``run`` leaves the options it does not know to Locust, so only its own are parsed)."""
    parser = importlib.import_module(SUBCOMMANDS[words[1]][0]).build_parser()
    args, skip = [], False
    for word in words[2:]:  # shell redirections are the shell's
        if skip or re.fullmatch(r"\d?>>?(&\d)?|<", word):
            skip = not skip and not word.endswith(("&1", "&2"))
            continue
        args.append(word)
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_known_args(args) if words[1] == "run" else parser.parse_args(args)
    except SystemExit as exc:
        return (said.getvalue().strip() or f"exit {exc.code}") if exc.code else None
    return None


@pytest.mark.parametrize("words", SHELL_COMMANDS)
def test_doc_commands_parse(words: list[str]) -> None:
    """Each ``loadknee`` command of a shell block, run or not, is one its parser accepts."""
    assert parse_problem(words) is None, " ".join(words)


@pytest.mark.parametrize("span", BARE_FLAGS)
def test_doc_flags_in_prose_exist(span: str) -> None:
    """A flag named in the prose (`--knee-flat-gain`) is some command's, with that spelling."""
    assert unknown_bare_flags(span) == [], span


def manifest_commands() -> list[list[str]]:
    commands = []
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            spec = (doc or {}).get("spec", {})
            pod = spec.get("template", {}).get("spec", {})
            for container in pod.get("containers", []):
                commands.append([str(w) for w in container.get("command", [])])
    return commands


def test_kubernetes_manifests_use_real_flags() -> None:
    commands = manifest_commands()
    assert [c[c.index("--master") if "--master" in c else c.index("--worker")] for c in commands]
    assert {c[0] for c in commands} == {"locust"}
    llm = [w for c in commands for w in c if w.startswith("--llm-")]
    assert len(llm) >= 10
    for words in commands:
        assert unknown_flags(words) == [], words


def test_a_misspelt_flag_is_caught() -> None:
    """The checks above can fail: a flag that does not exist is reported."""
    assert unknown_flags(["loadknee", "run", "--levelz", "1"]) == ["--levelz"]
    assert unknown_flags(["locust", "--llm-stage-second", "3"]) == ["--llm-stage-second"]
    assert unknown_flags(["loadknee", "analyze", "r", "--sla-ms", "1"]) == []
    assert unknown_bare_flags("--knee-flat-gain-ratio") == ["--knee-flat-gain-ratio"]
    assert unknown_bare_flags("--knee-flat-gain 0.2 --ignore-eos") == ["--ignore-eos"]
    assert unknown_bare_flags("--llm-* --parallel 8") == []  # a family; llama.cpp's own flag
    assert unknown_bare_flags("llama-server --ctx 1") == []  # another program's command line


def test_a_doc_that_names_a_missing_flag_fails(tmp_path: Path) -> None:
    """What the parametrized checks collect from a page: a missing flag in prose, in an inline
    command and in sample output is each found."""
    page = tmp_path / "page.md"
    page.write_text(
        "Raise it (`--knee-flat-gain-ratio`); run `loadknee run --host h --levelz 1`.\n\n"
        "```\nnext: loadknee analyze runs/x --explainn\n```\n",
        encoding="utf-8",
    )
    bare = [f for _line, span in spans(page) for f in unknown_bare_flags(span)]
    inline = [w for _l, span in spans(page) if span.startswith("loadknee ")
              for words in command_lines(span) for w in unknown_flags(words)]  # fmt: skip
    assert parse_problem(["loadknee", "analyze", "--explain"]) is not None  # no RUN_DIR
    assert parse_problem(["loadknee", "analyze", "r", ">", "/dev/null", "2>&1"]) is None
    shown = [w for _l, c in output_commands(page) for w in unknown_flags(command_lines(c)[0])]
    assert (bare, inline, shown) == (["--knee-flat-gain-ratio"], ["--levelz"], ["--explainn"])


SIM_BLOCKS = [
    pytest.param(body, id=f"{path.name}:{line}")
    for path in DOCS
    for line, info, body in shell_blocks(path)
    if info.split()[1:2] == ["sim"]
]


def test_the_runnable_blocks_are_there() -> None:
    files = {p.id.split(":")[0] for p in SIM_BLOCKS}
    assert {"README.md", "guide-replay.md", "guide-compare.md"} <= files, files


@functools.cache
def own_network() -> list[str]:
    """A prefix that runs a command in a fresh network namespace with loopback up, or []."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    probe = [unshare, "-rn", "sh", "-c", "ip link set lo up"]
    ok = subprocess.run(probe, capture_output=True, timeout=20).returncode == 0
    return [unshare, "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"] if ok else []


def _start_block(body: str, folder: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCUST_", "LOADKNEE_"))}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    script = folder / "block.sh"
    script.write_text(body, encoding="utf-8")
    cmd = [*own_network(), "bash", "-eu", "-o", "pipefail", str(script)]
    return subprocess.Popen(
        cmd, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip


def _finish_block(proc: subprocess.Popen[str], deadline: float) -> tuple[int | None, str]:
    """(exit status, output); the status is None when the block outlived its time."""
    try:
        out, _ = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate()
        return None, out
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.communicate()
    return proc.returncode, out


@pytest.fixture(scope="module")
def block_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int | None, str]]:
    """Each block's (exit status, output), by body. Each block has its own network namespace
    where one is available, so all start at once; otherwise their fixed port makes them run one
    after the other. Each is bounded by ``BLOCK_TIMEOUT_S`` from its start."""
    bodies = [p.values[0] for p in SIM_BLOCKS]
    at_once = bool(own_network())
    results: dict[str, tuple[int | None, str]] = {}
    running: list[tuple[str, subprocess.Popen[str], float]] = []
    try:
        for body in bodies:
            proc = _start_block(body, tmp_path_factory.mktemp("block"))
            running.append((body, proc, time.monotonic() + BLOCK_TIMEOUT_S))
            if not at_once:
                results[body] = _finish_block(*running.pop()[1:])
        for body, proc, deadline in running:
            results[body] = _finish_block(proc, deadline)
    finally:
        for _body, proc, _deadline in running:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.communicate()
    return results


@pytest.mark.slow
@pytest.mark.parametrize("body", SIM_BLOCKS)
def test_simulator_block_runs_as_written(
    body: str, block_results: dict[str, tuple[int | None, str]]
) -> None:
    code, out = block_results[body]
    assert code is not None, f"still running after {BLOCK_TIMEOUT_S:g} s:\n{out[-4000:]}"
    assert code == 0, f"exit {code}:\n{out[-4000:]}"


def test_run_refuses_only_llm_options_locust_lacks() -> None:
    """``loadknee run`` refuses an unknown ``--llm-*`` option before the pre-flight, from the
    plugin's option table: that table is exactly the ``--llm-*`` options Locust accepts."""
    from loadknee_locust.plugin.options import option_specs

    assert {f for f in locust_flags() if f.startswith("--llm-")} == {s.flag for s in option_specs()}
