"""``loadknee run``: a thin wrapper that builds a Locust command line and runs it in a subprocess.

It turns the plugin's options, each taken under its short name (``--levels``), into the
``--llm-*`` ones Locust reads, adds ``--headless`` (or the web UI with
``--web``), Locust's ``--processes N`` with a free master port, a ``--stop-timeout``
long enough for in-flight requests, and ``--exit-code-on-error 0`` (failed requests are data, in
``requests.csv``, not a failure of the run). Any option it does not know (an analysis
threshold ``--knee-flat-gain 0.2``, Locust's own ``--html report.html``) and everything after
``--`` goes to Locust as is.
Locust runs in a child process, which keeps gevent out of this one.

While it runs, the plugin's per-stage progress lines (stage, users, requests, errors, time left)
and Locust's errors are shown; Locust's other log lines and its summary tables go to the run
directory's ``locust.log`` (``--verbose`` shows them too); then ``run directory: <path>`` (one
line per run in web mode) and the answer: each run directory analysed as ``loadknee analyze``
does it, in a child process (``--no-analyze`` prints the command instead). ``loadknee run
--help`` shows the common options; ``--help-all`` every one, each under one name: a plugin
option under its short one (``--levels``; the ``--llm-levels`` that plain ``locust -f`` takes is
accepted too, not listed), an analysis threshold as the ``--knee-*`` it passes on (``locust
--help`` cannot list them: it prints before the locustfile loads).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from loadknee_core.command_parser import CommandParser, PlaceholderFormatter, fail
from loadknee_core.contract import LOCUST_LOG, RUN_JSON
from loadknee_core.redaction import strip_credentials
from loadknee_locust.client.concurrency_probe import BURST_SIZE
from loadknee_locust.commands.failures import all_failed_text
from loadknee_locust.commands.preflight import (
    SETUP_REQUESTS,
    PreflightError,
    Target,
    preflight_server,
    probe_limits,
)
from loadknee_locust.plugin.lifeline import preexec_die_with
from loadknee_locust.plugin.options import LlmOptions, OptionSpec, add_arguments, option_specs
from loadknee_locust.plugin.validate import option_problems
from loadknee_locust.record.rundir import default_run_id, write_run_json

RUN_DIR_RE = re.compile(r"loadknee: run directory (\S.*)$")
PROGRESS_RE = re.compile(r"loadknee (?:progress|sweep): (.*)$")
#: a line of Locust's log format, ``[time] host/LEVEL/logger: …`` (group 1: the level)
LOCUST_LOG_RE = re.compile(r"^\[[^\]]+\] [^/\s]+/([A-Z]+)/")


def default_locustfile(name: str = "default") -> str:
    """A packaged locustfile: ``default`` (stepped concurrency) or ``openloop`` (rates, replay)."""
    return str(resources.files("loadknee_locust") / "locustfiles" / f"{name}.py")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: ``--help-all``'s groups, in order: key → title (each plugin option names its key:
#: :func:`~loadknee_locust.plugin.options.opt`'s ``run``)
HELP_GROUPS: dict[str, str] = {
    "target": "target",
    "sweep": "sweep",
    "workload": "workload",
    "open": "open loop and replay",
    "output": "output",
    "telemetry": "telemetry",
    "locust": "Locust",
}


def _short_options() -> tuple[tuple[str, ...], ...]:
    """Every plugin option, in declaration order; the ones that exclude each other (their
    ``excludes`` key) in one tuple, at the place of the first."""
    sets: dict[str, list[str]] = {}
    for spec in option_specs():
        sets.setdefault(spec.excludes or spec.name, []).append(spec.name)
    return tuple(tuple(names) for names in sets.values())


#: the plugin options ``loadknee run`` takes under their short names (``--levels``), in the
#: order they go to Locust; names in one tuple exclude each other
SHORT_OPTIONS: tuple[tuple[str, ...], ...] = _short_options()
#: the plugin options of each group (the wrapper's own options name theirs where they are added)
GROUP_MEMBERS: dict[str, tuple[str, ...]] = {
    key: tuple(spec.name for spec in option_specs() if spec.run_group == key) for key in HELP_GROUPS
}
SHORT_GROUPS: dict[str, str] = {n: key for key, names in GROUP_MEMBERS.items() for n in names}
#: what ``--help`` shows, by group: the options the README and docs/ use and a first run needs
#: (the rest: ``--help-all``)
COMMON_FLAGS: dict[str, tuple[str, ...]] = {
    "target": ("--host", "--model", "--api-key-env"),
    "sweep": ("--levels", "--stage-seconds", "--no-refine", "--stop-after-knee", "--slo"),
    "workload": ("--input-tokens", "--output-tokens", "--prompt-log"),
    "open": ("--rates", "--replay-curve"),
    "output": ("--out", "--run-id", "--no-analyze", "--explain"),
    "locust": ("--processes", "--run-time", "--web"),
}
#: short options that may be given more than once; their values go to Locust comma separated
REPEATABLE = frozenset({"slo"})
#: Locust's option whose forms (90, 90s, 5m, 1h30m) the short option spelt so takes too
TIMESPAN_FLAG = "--run-time"
#: ``--processes`` (Locust's name) and the alias it replaced
PROCESSES_FLAGS = ("--processes", "--workers")


def timespan_seconds(text: str) -> float:
    """``"90"``, ``"90.5"``, ``"90s"``, ``"5m"``, ``"1h30m"`` → seconds, as Locust's
    ``--run-time`` reads them (plus fractions); argparse turns the ValueError into its error."""
    raw = text.strip().lower()
    try:
        return float(raw)
    except ValueError:
        pass
    found = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", raw)
    if not raw or found is None:
        raise ValueError(f"not a time span: {text!r} (e.g. 300, 90s, 5m, 1h30m)")
    hours, minutes, seconds = (int(g or 0) for g in found.groups())
    return float(hours * 3600 + minutes * 60 + seconds)


timespan_seconds.__name__ = "time span"  # argparse names the type in its error


def _help_with_default(spec: OptionSpec) -> str:
    """The option's help with its default always shown (a help text without ``%(default)s``
    gets one), the other options it names spelt as ``loadknee run`` takes them."""
    text = _as_typed(spec.help_text())
    shown = "%(default)" in spec.help or "(default" in text
    if not shown and spec.default not in ("", None) and not isinstance(spec.default, bool):
        value = f"{spec.default:g}" if isinstance(spec.default, float) else str(spec.default)
        return f"{text} (default {value})"
    return text


def _specs() -> dict[str, OptionSpec]:
    return {spec.name: spec for spec in option_specs()}


def build_parser() -> argparse.ArgumentParser:
    """Every option ``loadknee run`` parses, in :data:`HELP_GROUPS` (``--help-all`` shows them;
    ``--help`` the :data:`COMMON_FLAGS`)."""
    p = CommandParser(
        prog="loadknee run",
        description="Run a stepped load test against an OpenAI-compatible server (wraps Locust).",
        epilog="Unknown options and anything after '--' are passed to Locust unchanged.",
        add_help=False,
    )
    p.add_argument("-h", "--help", action="store_true", help="show the common options")
    p.add_argument("--help-all", action="store_true", help="show every option")
    group = {key: p.add_argument_group(title) for key, title in HELP_GROUPS.items()}
    group["target"].add_argument(
        "--host", metavar="URL", help="server base URL, e.g. http://127.0.0.1:8000"
    )
    specs = _specs()
    for names in SHORT_OPTIONS:
        home = group[SHORT_GROUPS[names[0]]]
        target: Any = home.add_mutually_exclusive_group() if len(names) > 1 else home
        for name in names:
            spec = specs[name]
            kwargs = _short_kwargs(spec)
            target.add_argument(*spec.run_flags, **kwargs)
            # the plugin's spelling (plain locust -f takes it): taken, hidden from the help
            home.add_argument(spec.flag, **{**kwargs, "help": argparse.SUPPRESS})
    group["target"].add_argument(
        "--no-preflight",
        action="store_true",
        help="skip the checks before the load (endpoint, model, one streamed request, prompt "
        "log, output folder)",
    )
    group["target"].add_argument(
        "--no-concurrency-probe",
        action="store_true",
        help="skip the pre-flight's concurrency probe (2 bursts of 32 streamed requests that "
        "tell a slot limit from a KV budget for loadknee predict) but keep the prompt-length "
        "calibration that --no-calibrate also skips",
    )
    group["output"].add_argument(
        "--explain",
        action="store_true",
        help="below the answer, every reason with the rule it follows (as loadknee analyze "
        "--explain)",
    )
    group["output"].add_argument(
        "--no-analyze",
        action="store_true",
        help="end with the run directory and the command that analyses it, not the answer",
    )
    group["output"].add_argument(
        "--verbose",
        action="store_true",
        help="show every Locust log line and Locust's own summary tables",
    )
    group["locust"].add_argument(
        *PROCESSES_FLAGS,
        dest="workers",
        metavar="N",
        type=int,
        default=0,
        help="Locust worker processes beside a master (0 = one process, -1 = one per CPU core, "
        "as Locust's --processes; --workers is the same)",
    )
    group["locust"].add_argument(
        "--web", action="store_true", help="start Locust's web UI instead of headless"
    )
    group["locust"].add_argument(
        "--web-port", type=int, metavar="PORT", default=8089, help="web UI port (default 8089)"
    )
    group["locust"].add_argument(
        "-f", "--locustfile", metavar="FILE", help="locustfile (default: the packaged one)"
    )
    group["locust"].add_argument(
        "--stop-timeout", type=float, metavar="SECONDS", default=None, help="seconds for "
        "in-flight requests at a stage change or stop (default: --request-timeout, "
        f"{_default_stop_timeout()})"
    )  # fmt: skip
    return p


def _short_kwargs(spec: OptionSpec) -> dict[str, Any]:
    """``add_argument``'s keywords for a plugin option on ``loadknee run``: not given, it is
    ``None`` (the plugin's own default applies); an on/off one a flag, as the plugin's."""
    kwargs: dict[str, Any] = {
        "dest": spec.name,
        "default": None,
        "help": _help_with_default(spec).replace("%", "%%"),
    }
    if spec.kind is bool:
        return {**kwargs, "action": "store_true"}
    timespan = TIMESPAN_FLAG in spec.run_flags
    kind = timespan_seconds if timespan else spec.kind
    return {
        **kwargs,
        "metavar": "TIME" if timespan else spec.metavar,
        "type": None if kind is str else kind,
        "choices": spec.choices,
        "action": "append" if spec.name in REPEATABLE else "store",
    }


class _Brief(PlaceholderFormatter):
    """``--help``'s formatter: each option's help up to its first sentence's end, and its
    default where the help ends with it."""

    def _expand_help(self, action: argparse.Action) -> str:
        full = super()._expand_help(action)
        brief = first_sentence(full)
        default = TRAILING_DEFAULT.search(full)
        return f"{brief} {default.group(0)}" if default and "default" not in brief else brief


#: the "(default X)" that :func:`_help_with_default` adds at the end of a help
TRAILING_DEFAULT = re.compile(r"\(default [^()]*\)$")


def first_sentence(text: str) -> str:
    """``text`` up to the end of its first sentence (a full stop or semicolon outside brackets,
    not the one of "e.g.")."""
    depth = 0
    for i, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        ends = i + 1 == len(text) or text[i + 1] == " "
        if depth == 0 and char in ".;" and ends and not text[:i].endswith(("e.g", "i.e")):
            return text[:i]
    return text.rstrip(".")


def common_help(parser: argparse.ArgumentParser) -> str:
    """``--help``: the :data:`COMMON_FLAGS` by group, and how to see the rest."""
    by_flag = {flag: action for action in parser._actions for flag in action.option_strings}
    every = [a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS]
    every += passed_through()
    formatter = _Brief(prog=parser.prog, max_help_position=26)
    formatter.add_usage(
        "%(prog)s --host URL [option ...] [-- locust option ...]", [], [], "usage: "
    )
    formatter.add_text(parser.description)
    for key, flags in COMMON_FLAGS.items():
        formatter.start_section(HELP_GROUPS[key])
        formatter.add_arguments([by_flag[flag] for flag in flags])
        formatter.end_section()
    formatter.add_text(f"all {len(every)} options: loadknee run --help-all")
    return formatter.format_help()


def passed_through() -> tuple[argparse.Action, ...]:
    """The options ``loadknee run`` passes to Locust as typed: the analysis's ``--knee-*``
    thresholds (every plugin option has its short name)."""
    return tuple(a for a in _passed_through_parser()._actions if a.option_strings)


def _passed_through_parser() -> argparse.ArgumentParser:
    """Locust's parser as the plugin extends it, less the options ``loadknee run`` names
    itself (configargparse, as Locust uses: each shows its environment variable)."""
    import configargparse

    parser = configargparse.ArgumentParser(prog="locust", add_help=False)
    add_arguments(parser, skip=frozenset(spec.name for spec in option_specs()))
    for action in parser._actions:  # the options they name, as loadknee run takes them
        action.help = _as_typed(action.help or "")
    return parser


def all_help(parser: argparse.ArgumentParser) -> str:
    """``--help-all``: every option, grouped, each once; the ones passed to Locust as typed
    under their Locust names."""
    text = _passed_through_parser().format_help()
    groups = text.split("\n\n", 1)[1] if text.startswith("usage") else text
    return (
        parser.format_help()
        + "\nPassed to Locust as typed (plain `locust -f` takes them too):\n\n"
        + groups
    )


def _passed(extra: list[str], flag: str) -> str | None:
    """The value of ``flag`` among the options passed through to Locust, if given."""
    for i, arg in enumerate(extra):
        if arg == flag and i + 1 < len(extra):
            return extra[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _target(args: argparse.Namespace, extra: list[str]) -> Target:
    d = LlmOptions()
    stream = not args.no_stream and "--llm-no-stream" not in extra
    return Target(
        host=args.host,
        model=args.model or _passed(extra, "--llm-model") or "",
        endpoint=args.endpoint or _passed(extra, "--llm-endpoint") or d.endpoint,
        stream=stream,
        api_key_env=args.api_key_env or _passed(extra, "--llm-api-key-env") or d.api_key_env,
        prompt_log=args.prompt_log or _passed(extra, "--llm-prompt-log") or "",
        out=args.out or _passed(extra, "--llm-out") or d.out,
    )


def _default_stop_timeout() -> str:
    return f"{LlmOptions().request_timeout:g}"


def _unique_run_id(out: str, run_id: str | None) -> str:
    if run_id:
        return run_id
    import time

    base = default_run_id(time.time())
    candidate, n = base, 0
    while (Path(out) / candidate).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def locust_command(args: argparse.Namespace, extra: list[str]) -> list[str]:
    """The Locust command line for the parsed wrapper options (pure: tested without running)."""
    open_loop = bool(args.rates or args.arrival_log)
    locustfile = args.locustfile or default_locustfile("openloop" if open_loop else "default")
    cmd = [sys.executable, "-m", "locust", "-f", locustfile]
    if args.host:
        cmd += ["--host", args.host]
    specs = _specs()
    for name, value in _given(args).items():
        if value is True:  # an on/off option: its flag alone
            cmd.append(specs[name].flag)
            continue
        text = f"{value:g}" if isinstance(value, float) else str(value)
        cmd += [specs[name].flag, text]
    if args.stage_requests is not None and args.stage_seconds is None:
        cmd += [specs["stage_seconds"].flag, "0"]  # count mode: no duration check
    if args.web:
        cmd += ["--web-host", "127.0.0.1", "--web-port", str(args.web_port)]
    else:
        cmd += ["--headless", "--only-summary"]
    if args.workers != 0:
        port = str(free_port())
        cmd += ["--processes", str(args.workers), "--master-bind-port", port]
        cmd += ["--master-port", port, "--master-bind-host", "127.0.0.1"]
    if args.stop_timeout is not None:
        cmd += ["--stop-timeout", f"{args.stop_timeout:g}"]
    elif "--stop-timeout" not in extra:
        cmd += ["--stop-timeout", _default_stop_timeout()]
    cmd += ["--exit-code-on-error", "0", *extra]
    return cmd


def _given(args: argparse.Namespace) -> dict[str, Any]:
    """The short options typed, ``{field: value}`` in :data:`SHORT_OPTIONS` order."""
    given: dict[str, Any] = {}
    for names in SHORT_OPTIONS:
        for name in names:
            value = getattr(args, name)
            if isinstance(value, list):  # a repeatable option: one comma list
                value = ",".join(value)
            if value is not None:
                given[name] = value
    return given


def _options(args: argparse.Namespace) -> LlmOptions:
    """The options the plugin will see for the typed ones (the rest: its defaults)."""
    specs = _specs()
    values = {name: specs[name].convert(value) for name, value in _given(args).items()}
    if args.stage_requests is not None and args.stage_seconds is None:
        values["stage_seconds"] = "0"  # count mode, as locust_command passes it
    return LlmOptions(**values)


def _as_typed(problem: str) -> str:
    """A plugin problem named as the user typed the options (``--stage-seconds``, not the
    ``--llm-stage-seconds`` Locust would name)."""
    for spec in option_specs():
        problem = re.sub(rf"{spec.flag}(?![\w-])", spec.run_flags[0], problem)
    return problem


def _validate(args: argparse.Namespace) -> str | None:
    """Problems with the options, before anything starts: the plugin's own checks
    (:func:`~loadknee_locust.plugin.validate.option_problems`), named as the user typed them."""
    if not args.host:
        return "--host is required (the server's base URL)"
    if args.workers < -1:
        return "--processes must be >= 0, or -1 for one per CPU core"
    try:
        problems = option_problems(_options(args))
    except (TypeError, ValueError) as exc:  # a value the option's type refuses
        problems = [str(exc)]
    return "; ".join(_as_typed(p) for p in problems) or None


def _unknown_plugin_option(passed: list[str]) -> str | None:
    """A pass-through option that Locust would refuse only after the pre-flight: an ``--llm-*``
    the plugin lacks (``--llm-ignore-eos``); a close one named as ``loadknee run`` takes it."""
    short = {spec.flag: spec.run_flags[0] for spec in option_specs()}
    for word in passed:
        typed = word.split("=", 1)[0]
        if typed.startswith("--llm-") and typed not in short:
            close = difflib.get_close_matches(typed, sorted(short), n=1, cutoff=0.75)
            hint = f" (did you mean {short[close[0]]}?)" if close else ""
            return f"unknown option {typed}{hint}; loadknee run --help-all lists the options"
    return None


def analyze_command(run_dir: str, *, explain: bool = False) -> str:
    """The exact command that analyses ``run_dir``, runnable with or without an activated venv
    (with ``explain``, asking for every reason below the answer)."""
    exe = shutil.which("loadknee")
    here = Path(sys.executable).parent / "loadknee"
    if exe and Path(exe).resolve() == here.resolve():
        prog = "loadknee"
    else:
        prog = str(here) if here.exists() else f"{sys.executable} -m loadknee_locust"
    return f"{prog} analyze {shlex.quote(run_dir)}" + (" --explain" if explain else "")


#: first line of Locust's own closing summary (its aggregated tables, bucketed percentiles that
#: disagree with loadknee's exact per-stage numbers): hidden without --verbose
LOCUST_TABLE_RE = re.compile(r"^Type\s+Name\s+# reqs")


class OutputFilter:
    """What to print of Locust's output, and what only its log file keeps.

    Printed: the progress lines (as ``[loadknee] …``), Locust's ERROR and CRITICAL log lines and
    plain lines (a traceback, an argument error). Locust's other log lines (``[time]
    host/WARNING/loadknee: …``, its INFO chatter) and its closing tables (bucketed percentiles
    that disagree with loadknee's exact ones) would interleave with the progress lines: they go
    only to ``locust.log`` in the run directory, which keeps every line Locust printed.
    ``verbose`` prints everything as well.
    """

    def __init__(self, verbose: bool) -> None:
        self.verbose = verbose
        self.in_tables = False
        self.lines: list[str] = []  # every line, for locust.log
        self.run_dirs: list[str] = []
        self._starts: list[int] = []  # index in lines where each run directory was announced
        self.hidden_warnings = 0

    def show(self, line: str) -> str | None:
        """The text to print for one line of Locust's output (None: the log file only)."""
        self.lines.append(line)
        found = RUN_DIR_RE.search(line)
        if found:
            self.run_dirs.append(found.group(1).strip())
            self._starts.append(len(self.lines) - 1)
        progress = PROGRESS_RE.search(line)
        if progress:
            return "[loadknee] " + progress.group(1)
        level = LOCUST_LOG_RE.match(line)
        if level and level.group(1) == "WARNING":
            self.hidden_warnings += not self.verbose
        if self.verbose:
            return line
        if LOCUST_TABLE_RE.match(line):
            self.in_tables = True
        if level:
            return line if level.group(1) in ("ERROR", "CRITICAL") else None
        return None if self.in_tables else line

    def log_parts(self) -> list[tuple[str, list[str]]]:
        """Each run directory with its share of the lines: from its announcement to the next
        one's (the first also gets the lines before it)."""
        bounds = [0, *self._starts[1:], len(self.lines)]
        return [(d, self.lines[bounds[i] : bounds[i + 1]]) for i, d in enumerate(self.run_dirs)]


def write_locust_logs(output: OutputFilter) -> list[str]:
    """Write each run directory's ``locust.log``; the paths written."""
    written = []
    for run_dir, lines in output.log_parts():
        if os.path.isdir(run_dir):
            path = os.path.join(run_dir, LOCUST_LOG)
            Path(path).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
            written.append(path)
    return written


def wants_concurrency_probe(args: argparse.Namespace, passed: list[str]) -> bool:
    """Whether the pre-flight sends the concurrency probe: not with ``--no-calibrate`` (in
    either spelling, which also skips the prompt-length calibration), nor with
    ``--no-concurrency-probe``, which keeps that calibration: uncalibrated prompts miss their
    length by the chat template's tokens (their rows then carry no input target and record the
    length the server counted), so a run that only wants the probe's seconds back and its
    prompts exact needs this one."""
    return not (args.no_calibrate or args.no_concurrency_probe or "--llm-no-calibrate" in passed)


#: ``setup_requests``' name for the concurrency probe's requests (the pre-flight's, once a run)
CONCURRENCY_PROBES = "preflight_concurrency_probes"


def _count_preflight(
    run_dir: str,
    server: dict[str, Any] | None = None,
    probes: int = 0,
    bursts: list[dict[str, Any]] | None = None,
) -> None:
    """Add the pre-flight's requests to ``run.json``'s ``setup_requests`` (written by Locust's
    side, which never saw them), so every request sent is counted in the run directory; the
    engine it detected as ``run.json``'s ``server`` object (kept where one is there); and the
    concurrency probe's ``bursts`` as ``prompt_source.concurrency_probes``."""
    path = Path(run_dir) / RUN_JSON
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # no run directory (Locust stopped before one): nothing to count into
    source = info.setdefault("prompt_source", {})
    if not isinstance(source, dict):
        return
    setup = source.setdefault("setup_requests", {})
    sent = sum(int(b["sent"]) for b in bursts or ())
    counts = {**SETUP_REQUESTS, "preflight_engine_probe": probes, CONCURRENCY_PROBES: sent}
    for kind, n in counts.items():
        if n:
            setup[kind] = int(setup.get(kind, 0)) + n
    if bursts:
        source["concurrency_probes"] = bursts
    if server and not isinstance(info.get("server"), dict):
        info["server"] = server
    write_run_json(run_dir, info)


def main(argv: list[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    extra_after: list[str] = []
    if "--" in raw:
        cut = raw.index("--")
        raw, extra_after = raw[:cut], raw[cut + 1 :]
    parser = build_parser()
    args, unknown = parser.parse_known_args(raw)
    if args.help_all:
        print(all_help(parser))
        return 0
    if args.help:
        print(common_help(parser), end="")
        return 0
    problem = _validate(args) or _unknown_plugin_option(unknown)
    if problem:
        return fail("loadknee run", problem)
    out = args.out or "runs"
    passed = [*unknown, *extra_after]
    server: dict[str, Any] = {}
    probes = 0
    bursts: list[dict[str, Any]] = []
    if not args.no_preflight:
        target = _target(args, passed)
        try:
            model, server, probes = preflight_server(target)
        except PreflightError as exc:
            print(f"loadknee run: stopped before any load: {exc}", file=sys.stderr)
            return 2
        engine = f" ({server['engine']})" if server.get("engine") else ""
        print(
            f"[loadknee] pre-flight ok: {strip_credentials(args.host)} serves {model}{engine}",
            flush=True,
        )
        if wants_concurrency_probe(args, passed):
            tokens = int(args.input_tokens or _passed(passed, "--llm-input-tokens") or 0)
            print(
                f"[loadknee] concurrency probe: 2 bursts of {BURST_SIZE} streamed requests "
                "(slots or KV, for loadknee predict; --no-concurrency-probe skips it)",
                flush=True,
            )
            pin = not (args.no_ignore_eos or "--llm-no-ignore-eos" in passed)
            bursts = probe_limits(target, model, tokens or LlmOptions().input_tokens, pin)
            lost = 2 * BURST_SIZE - sum(len(b["streams"]) for b in bursts)
            if lost:
                print(f"[loadknee] concurrency probe: {lost} of {2 * BURST_SIZE} failed")
    args.run_id = _unique_run_id(out, args.run_id)
    cmd = locust_command(args, passed)
    if args.web:
        print(f"[loadknee] web UI: http://127.0.0.1:{args.web_port} (Ctrl-C to finish)", flush=True)
    output = OutputFilter(args.verbose)
    # Locust runs in its own session so a terminal Ctrl-C reaches only this process, which
    # passes the same signal on (the plugin's interrupt guard: the first ends the sweep
    # gracefully, a second at once). If this process dies without passing anything on (SIGKILL),
    # the kernel's parent-death signal stops the child (plugin/lifeline.py says why not a
    # process group or a pipe).
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,
        preexec_fn=preexec_die_with(os.getpid()),
    )
    forwarded = {
        sig: signal.signal(sig, lambda signum, _frame: proc.send_signal(signum))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            shown = output.show(line.rstrip("\n"))
            if shown is not None:
                print(shown, flush=True)
        rc = proc.wait()
    finally:
        for sig, previous in forwarded.items():
            signal.signal(sig, previous)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    logs = write_locust_logs(output)
    if output.hidden_warnings and logs:
        warnings = "a Locust warning" if output.hidden_warnings == 1 else "Locust warnings"
        print(f"[loadknee] {warnings} not shown here: {', '.join(logs)}", flush=True)
    paths = output.run_dirs or [os.path.join(out, args.run_id)]
    if not args.no_preflight:
        for path in paths:
            _count_preflight(path, server, probes, bursts)
    for path in paths:
        if os.path.isdir(path):
            print(f"run directory: {path}", flush=True)
    failed_runs = set()
    if rc in (0, 3):  # 3: the sweep stopped itself on a total failure; name the causes too
        for path in paths:
            failed = all_failed_text(path)
            if failed:
                print(f"loadknee run: {failed}", file=sys.stderr)
                failed_runs.add(path)
                rc = 3
    answered = rc == 0 and not args.no_analyze
    for path in paths:
        if not os.path.isdir(path):
            continue
        if answered and path not in failed_runs:
            rc = max(rc, _analyze(path, explain=args.explain))
        else:
            print(f"next: {analyze_command(path, explain=args.explain)}", flush=True)
    return rc


def _analyze(run_dir: str, *, explain: bool) -> int:
    """The run's answer, as ``loadknee analyze`` prints it (in a child: pandas stays out of this
    process, gevent out of the analysis); its exit status (3: it cannot tell, docs/method.md)."""
    print(f"[loadknee] analysing {run_dir} …", flush=True)
    cmd = [sys.executable, "-m", "loadknee_locust", "analyze", run_dir]
    done = subprocess.run([*cmd, *(["--explain"] if explain else [])], check=False)
    if done.returncode not in (0, 3):
        print(f"next: {analyze_command(run_dir, explain=explain)}", flush=True)
    return done.returncode
