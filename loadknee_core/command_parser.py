"""The argument parser every ``loadknee`` command uses: a wrong argument costs one line.

argparse prints the whole usage (30 lines and more for ``run`` and ``analyze``) above its one
useful line; here an error is that line alone, naming the flag or input, with a close spelling
when there is one and where the usage is (``-h``), and the exit status stays 2. Stdlib only:
the Locust side's commands use it too.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from typing import Any, NoReturn

from loadknee_core.flags import metavar

UNRECOGNIZED = re.compile(r"^unrecognized arguments: (.*)$")


class PlaceholderFormatter(argparse.HelpFormatter):
    """Help whose placeholders say what to type (``--out DIR``, ``--port N``), from
    :func:`loadknee_core.flags.metavar`, where an option names none: never its dest upper-cased."""

    def _get_default_metavar_for_optional(self, action: argparse.Action) -> str:
        kind = action.type if isinstance(action.type, type) else None
        return metavar(action.dest, kind)


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line on stderr (exit 2, usage only on ``-h``)
    and whose help names what to type after each option (:class:`PlaceholderFormatter`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", PlaceholderFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {self.hint(message)} ({self.prog} -h for help)\n")

    def hint(self, message: str) -> str:
        """``message`` with the nearest real flag for each misspelt one."""
        found = UNRECOGNIZED.match(message)
        if not found:
            return message
        words = found.group(1).split()
        flags = [self.suggest(w) for w in words if w.startswith("-")]
        if flags:  # the words after an unknown flag are its value: not named again
            return "unknown option " + "; ".join(flags)
        return "unexpected argument " + " ".join(words)

    def suggest(self, word: str) -> str:
        """``word`` and, when a flag of this parser is spelt close to it, that flag."""
        flag = word.split("=", 1)[0]
        known = [s for a in self._actions for s in a.option_strings if s.startswith("--")]
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.75)
        return f"{word} (did you mean {close[0]}?)" if close else word


def fail(prog: str, message: str) -> int:
    """Print ``prog: message`` on stderr, one line; the exit status of a bad input (2)."""
    print(f"{prog}: {message}", file=sys.stderr)
    return 2
