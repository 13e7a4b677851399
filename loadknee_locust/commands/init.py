"""``loadknee init [DIR]``: write a starter locustfile and a commented ``locust.conf`` to edit.

The starter is the quickest way from ``pip install loadknee`` to a sweep driven by plain
``locust``: ``locust --config DIR/locust.conf`` runs it headless, and the same files work with the
web UI (drop ``headless``). ``--example NAME`` copies one of the shipped example locustfiles
instead of the starter (they travel inside the wheel as :mod:`loadknee_locust.examples`).

``locust.conf`` lists every ``--llm-*`` option with its default and help, commented out, read
from the option declarations themselves, so it can never drift from what Locust accepts.
Existing files are never overwritten unless ``--force`` is given.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from importlib import resources
from pathlib import Path
from typing import Any

from loadknee_core.command_parser import CommandParser

EXAMPLES = ("fixed_length", "log_replay", "batch")

STARTER = '''"""A loadknee locustfile: chat requests in stepped stages, set by --llm-* options.

Run it headless with the options in locust.conf beside it:
    locust --config locust.conf
or open the web UI (remove "headless" from locust.conf) and start the sweep from the browser.
Then analyse the run directory it prints:
    loadknee analyze runs/<run id>
"""

from __future__ import annotations

from locust import events

from loadknee_locust import ChatUser, KneeShape, install  # noqa: F401  (KneeShape drives the sweep)

install(events)  # adds the --llm-* options, the recorder, telemetry and the web UI's Knee tab


class Chat(ChatUser):
    """One simulated user: a streamed /v1/chat/completions request, then the next at once.

    Use CompletionsUser for /v1/completions or BatchCompletionsUser for batched prompts.
    """
'''


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="loadknee init",
        description="Write a starter locustfile.py and a commented locust.conf into DIR.",
    )
    parser.add_argument("dir", nargs="?", default=".", help="target folder (default: .)")
    parser.add_argument(
        "--host",
        default="http://127.0.0.1:8000",
        help="server URL written into locust.conf (default: http://127.0.0.1:8000)",
    )
    parser.add_argument(
        "--example",
        choices=EXAMPLES,
        default=None,
        help="copy this shipped example as locustfile.py instead of the starter",
    )
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    return parser


def option_lines() -> list[str]:
    """Every ``--llm-*`` option as commented ``locust.conf`` lines, grouped as ``--help`` shows."""
    import configargparse

    from loadknee_locust.plugin import options

    parser: Any = configargparse.ArgumentParser()
    options.add_arguments(parser)
    expand = parser._get_formatter()._expand_help  # the help as --help shows it: %(default)s filled
    lines: list[str] = []
    for group in parser._action_groups:  # argparse keeps groups only here
        actions = [a for a in group._group_actions if a.dest.startswith("llm_")]
        if not actions:
            continue
        lines += ["", f"# --- {group.title} ---"]
        for action in actions:
            key = action.option_strings[0].lstrip("-")
            help_text = " ".join(expand(action).split())
            lines += textwrap.wrap(help_text, 98, initial_indent="# ", subsequent_indent="# ")
            if action.nargs == 0:  # a flag: the line that switches it on
                lines.append(f"# {key} = true")
            else:
                lines.append(f"# {key} = {action.default}".rstrip())
    return lines


def conf_text(host: str) -> str:
    head = [
        "# locust.conf written by `loadknee init`: run with `locust --config locust.conf`.",
        "# Each commented 'key = value' line shows an option's default (for a flag, the line that",
        "# switches it on); uncomment and edit it to change it. Every key is also a command-line",
        "# flag (--key value) and a LOADKNEE_<KEY> environment variable.",
        "locustfile = locustfile.py",
        f"host = {host}",
        "headless = true",
        "# the stepped shape drives the users: no --users / --spawn-rate needed",
    ]
    return "\n".join([*head, *option_lines()]) + "\n"


def example_text(name: str) -> str:
    """A shipped example: ``loadknee_locust.examples`` in a wheel, ``locustfiles/`` in a checkout.

    In a source checkout run from the repo root, ``loadknee_locust`` is imported from the folder
    itself, where the wheel's package-dir mapping does not apply; the examples are then the
    top-level ``locustfiles/`` two levels above this file.
    """
    try:
        return (resources.files("loadknee_locust.examples") / f"{name}.py").read_text()
    except ModuleNotFoundError:
        return (Path(__file__).resolve().parents[2] / "locustfiles" / f"{name}.py").read_text()


def locustfile_text(example: str | None) -> str:
    return STARTER if example is None else example_text(example)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    folder = Path(args.dir)
    files = {
        folder / "locustfile.py": locustfile_text(args.example),
        folder / "locust.conf": conf_text(args.host),
    }
    existing = [str(path) for path in files if path.exists()]
    if existing and not args.force:
        print(
            f"loadknee init: {', '.join(existing)} already exist; nothing written "
            "(--force overwrites)",
            file=sys.stderr,
        )
        return 1
    folder.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        path.write_text(text)
        print(f"wrote {path}")
    print(f"next: cd {folder} && locust --config locust.conf   (then: loadknee analyze runs/<id>)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
