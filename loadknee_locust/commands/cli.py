"""The ``loadknee`` command: dispatches to one subcommand, importing only what that one needs.

Each subcommand owns its argument parser (``main(argv) -> int`` in its module), so that
``loadknee analyze`` never imports locust/gevent and ``loadknee sim`` never imports pandas.
"""

from __future__ import annotations

import difflib
import importlib
import sys

#: subcommand → (module with ``main(argv) -> int``, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "sim": ("loadknee_locust.sim.cli", "serve the simulated OpenAI-compatible LLM server"),
    "run": (
        "loadknee_locust.commands.run",
        "run a stepped load test (a thin wrapper around Locust)",
    ),
    "analyze": ("analysis.cli", "analyse a run directory: record table, knee, recommendations"),
    "compare": ("analysis.compare.cli", "compare two or more run directories"),
    "predict": (
        "analysis.predict.cli",
        "predict the capacity at other prompt/completion lengths from one run (what-if)",
    ),
    "verify": (
        "loadknee_locust.commands.verify",
        "re-run a short sweep and check the recommendation still holds (exit 1 if not)",
    ),
    "import": (
        "analysis.importers.cli",
        "turn vLLM bench / GuideLLM / AIPerf results into a run directory",
    ),
    "trace": (
        "analysis.traffic.cli",
        "a log's or public trace's traffic: arrivals, in flight, burstiness, headroom to a knee",
    ),
    "demo": ("loadknee_locust.commands.demo", "simulator → short sweep → analysis, end to end"),
    "init": ("loadknee_locust.commands.init", "write a starter locustfile.py and locust.conf"),
}

USAGE = "usage: loadknee {" + ",".join(SUBCOMMANDS) + "} [options]\n"


def _help() -> str:
    lines = [USAGE, "Find the concurrency knee of an OpenAI-compatible LLM server.\n", "commands:"]
    lines += [f"  {name:<9} {text}" for name, (_, text) in SUBCOMMANDS.items()]
    lines.append("\n'loadknee COMMAND --help' lists each command's options.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_help())
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        from loadknee_locust import __version__

        print(f"loadknee {__version__}")
        return 0
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        close = difflib.get_close_matches(name, list(SUBCOMMANDS), n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        print(f"loadknee: unknown command {name!r}: {hint}(commands: "
              f"{', '.join(SUBCOMMANDS)}; loadknee -h)", file=sys.stderr)  # fmt: skip
        return 2
    module = importlib.import_module(SUBCOMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
