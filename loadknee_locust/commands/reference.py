"""Write ``docs/reference.md``, every option of every command, from the parsers themselves.

Run ``python -m loadknee_locust.commands.reference`` after adding or changing an option (``--check``
only compares; a test does that, so a stale page fails CI with this command in its message).
Generated rather than written so the page cannot drift: each subcommand listed in
:data:`loadknee_locust.commands.cli.SUBCOMMANDS` contributes its ``build_parser()`` (or, for a
module without one, its ``--help`` text), and the ``--llm-*`` Locust options come from
:func:`loadknee_locust.plugin.options.option_specs`, with their environment variables. The output
depends on nothing but the code: no terminal width, no paths, no dates.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import sys
from pathlib import Path
from typing import Any

REGENERATE = "python -m loadknee_locust.commands.reference"
DEFAULT_PATH = Path("docs") / "reference.md"


def _cell(text: Any) -> str:
    """One markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}` (positional)"
    return ", ".join(f"`{flag}`" for flag in action.option_strings)


def _default(action: argparse.Action) -> str:
    if action.option_strings and isinstance(
        action, argparse._StoreTrueAction | argparse._HelpAction
    ):
        return ""
    value = action.default
    if value is None or value is argparse.SUPPRESS:
        return ""
    return f"`{value}`" if str(value) != "" else '`""`'


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    text = action.help or ""
    if "%" in text:
        params = {**vars(action), "prog": parser.prog}
        params = {k: getattr(v, "__name__", v) for k, v in params.items()}
        with contextlib.suppress(KeyError, ValueError, TypeError):
            text = text % params
    if action.choices and "{" not in text:
        text += " Choices: " + ", ".join(f"`{c}`" for c in action.choices) + "."
    return _cell(text)


TABLE_HEAD = ["| option | default | what it does |", "|---|---|---|"]


def _row(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    return f"| {_flags(action)} | {_default(action)} | {_help(parser, action)} |"


def parser_section(parser: argparse.ArgumentParser) -> list[str]:
    """The table of one argparse parser: flags, default, help (in declaration order)."""
    lines: list[str] = []
    if parser.description:
        lines += [_cell(parser.description), ""]
    lines += TABLE_HEAD
    for action in parser._actions:
        if action.help is argparse.SUPPRESS:
            continue
        lines.append(_row(parser, action))
    if parser.epilog:
        lines += ["", _cell(parser.epilog)]
    return lines


def _help_text(module: Any) -> list[str]:
    """A subcommand without ``build_parser``: its own ``--help`` output, verbatim."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        module.main(["--help"])
    return ["```text", out.getvalue().rstrip(), "```"]


def llm_section() -> list[str]:
    from loadknee_locust.plugin.options import GROUP_TITLES, option_specs

    lines = [
        "## Locust options (`--llm-*`)",
        "",
        "Added to Locust's parser by the plugin (`install(events)` in a locustfile, or the "
        "packaged locustfile of `loadknee run`). Each also reads its environment variable and "
        "`locust.conf` / `[tool.locust]` (key without the dashes, e.g. `llm-levels = 1,2,4`); "
        "the command line wins over the variable, the variable over the file.",
    ]
    specs = option_specs()
    for group, title in GROUP_TITLES.items():
        members = [s for s in specs if s.group == group]
        if not members:
            continue
        lines += ["", f"### {title}", "", "| option | variable | default | what it does |"]
        lines.append("|---|---|---|---|")
        for spec in members:
            default = "" if spec.kind is bool else f"`{spec.default}`"
            if spec.kind is not bool and spec.default == "":
                default = '`""`'
            text = spec.help_text()
            if spec.choices:
                text += " Choices: " + ", ".join(f"`{c}`" for c in spec.choices) + "."
            lines.append(f"| `{spec.flag}` | `{spec.env_var}` | {default} | {_cell(text)} |")
    return lines


def reference_text() -> str:
    """The whole page (deterministic: the same code gives the same bytes)."""
    from loadknee_locust.commands.cli import SUBCOMMANDS

    lines = [
        "# Reference: every option",
        "",
        f"Generated from the parsers by `{REGENERATE}`; do not edit by hand "
        "(a test fails when this page is stale).",
        "",
        "Commands: " + ", ".join(f"[`loadknee {n}`](#loadknee-{n})" for n in SUBCOMMANDS) + "; "
        "[Locust options](#locust-options---llm-).",
    ]
    for name, (module_name, summary) in SUBCOMMANDS.items():
        lines += ["", f"## loadknee {name}", "", f"{_cell(summary)}.", ""]
        module = importlib.import_module(module_name)
        build = getattr(module, "build_parser", None)
        if callable(build):
            parser = build()
            lines += parser_section(parser)
            extra = getattr(module, "passed_through", None)
            if callable(extra):  # what its --help-all adds: the options it passes on as typed
                lines += ["", "Also taken, passed to Locust as typed:", "", *TABLE_HEAD]
                lines += [_row(parser, action) for action in extra()]
        else:
            lines += _help_text(module)
    lines += ["", *llm_section()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=REGENERATE, description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default=str(DEFAULT_PATH), help="page to write")
    parser.add_argument("--check", action="store_true", help="only say whether it is up to date")
    args = parser.parse_args(argv)
    os.environ["COLUMNS"] = "100"  # help text a module prints itself wraps at a fixed width
    text = reference_text()
    path = Path(args.path)
    current = path.read_text(encoding="utf-8") if path.exists() else None
    if args.check:
        if current != text:
            print(f"{path} is stale; regenerate it with: {REGENERATE}", file=sys.stderr)
            return 1
        print(f"{path} is up to date")
        return 0
    if current != text:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    else:
        print(f"{path} already up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
