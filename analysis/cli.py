"""``loadknee analyze RUN_DIR``: analyse one run, write its report folder, print table/knee/advice.

The answer is printed first, then the report files are written (the plots and the page take
longer than the analysis); the answer says where they go. The PNGs are drawn by a child process
started before the analysis (:mod:`analysis.report.painter`: it imports matplotlib meanwhile),
and the modules that write the other files are imported only once the answer is printed.

Exit codes: 0 analysed (an answer, perhaps from the judged stages only, each stage left out
named); 3 analysed, but it cannot tell: no stage had enough usable data to judge (no rows, most
rows excluded, or rows missing from a cut requests.csv), or the lowest judged stage already
breaks a limit while the stages below it could not be judged, or the load generator ran late at
a stage that could have moved the answer (docs/method.md: Late load generator), or most
resamples of the stages' time windows gave another answer (docs/method.md: Noisy stage): the
screen and
stderr say "cannot tell: …" with what to do, nothing is recommended and no cluster file is
written; 2 the run directory is missing or invalid (one paragraph on stderr listing every
problem, no traceback) or the arguments are wrong. Progress of the long steps goes to stderr,
so stdout holds only the result (pipe-able, e.g. ``--format json | jq``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from analysis.advice.recommend import RecommendParams
from analysis.cluster.plan import ClusterParams
from analysis.importers.cli import add_source_args, describe, import_files
from analysis.importers.model import ImportFormatError
from analysis.inputs.load import RunDirError
from analysis.knee.find import KneeParams
from analysis.pipeline import Analysis, analyze_run
from analysis.report.knee_json import analysis_json
from analysis.report.knee_summary import override_note
from analysis.report.painter import Painter
from analysis.report.paths import report_dir, report_paths
from analysis.report.plot_inputs import PlotInputs
from analysis.report.screen import WIDTH, explain_text, screen_text
from analysis.report.standing import cannot_tell_text
from loadknee_core.command_parser import CommandParser, fail
from loadknee_core.slo_targets import SloParams


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="loadknee analyze",
        description="Analyse a run directory: record table, knee with reasons, recommended "
        "settings; writes record.csv/.md, knee.json, recommendations.yaml, the PNG plots, "
        "a self-contained report.html and the cluster files (KEDA, HPA, alert rules, latency "
        "profile, energy, llm-d reports; --emit) into RUN_DIR/report/. Exit codes: 0 "
        "analysed; 3 cannot tell (no stage judged, or the stages below the first limit not "
        "judged: rows missing or unusable, a late load generator at or below the first "
        "level past the answer, or an answer most resamples of the stages do not give; "
        "nothing recommended, no cluster file); 2 a missing "
        "or invalid run directory, or wrong arguments.",
    )
    parser.add_argument(
        "run_dir",
        metavar="RUN_DIR",
        nargs="+",
        help="a run directory (runs/<run_id>); with --from, another tool's result files",
    )
    add_source_args(parser, required=False)
    parser.add_argument(
        "--import-dir",
        metavar="DIR",
        default=None,
        help="with --from: where the imported run directory goes (default runs/<tool>-<name>)",
    )
    parser.add_argument(
        "--nvidia-smi-csv",
        metavar="FILE",
        help="GPU samples written by nvidia-smi --query-gpu=timestamp,memory.used,memory.total,"
        "utilization.gpu --format=csv -lms 500 during the run (merged by time)",
    )
    parser.add_argument(
        "--nvidia-smi-tz",
        metavar="ZONE",
        help="time zone of the GPU host that wrote --nvidia-smi-csv (its timestamps carry none): "
        "an IANA name, UTC or an offset like +08:00 (default: this machine's zone)",
    )
    parser.add_argument(
        "--out", metavar="DIR", help="report folder (default: RUN_DIR/report)", default=None
    )
    parser.add_argument(
        "--format",
        choices=["text", "markdown", "json"],
        default="text",
        help="what to print on stdout (default text); the files are written in every format",
    )
    parser.add_argument(
        "--width", type=int, default=WIDTH, help="terminal line width (default %(default)s)"
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="below the answer, every reason with the rule it follows (as report.html has them)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    KneeParams.add_cli_args(parser, given_only=True)  # not typed: the run's recorded value
    RecommendParams.add_cli_args(parser)  # --target-concurrency, --replica-efficiency, ...
    SloParams.add_cli_args(parser)  # --slo, --goodput, --goodput-min-pct, --slo-file, --slo-preset
    ClusterParams.add_cli_args(parser)  # --emit, --k8s-deployment, --k8s-namespace, ...
    return parser


def render_stdout(
    analysis: Analysis, fmt: str, *, width: int, paths: dict[str, Path], explain: bool = False
) -> str:
    """What stdout shows: the one screen (text or markdown table), with ``explain`` every reason
    below it; or knee.json's text for ``--format json``."""
    if fmt == "json":
        return analysis_json(analysis)
    text = screen_text(analysis, paths, width=width, markdown=fmt == "markdown")
    if explain:
        text += "\n\n" + explain_text(analysis, paths, width=width)
    return text


def _imported_run_dir(ns: argparse.Namespace) -> Path:
    """``analyze FILE… --from TOOL``: import first, then analyse the new run directory."""
    paths = [Path(p) for p in ns.run_dir]
    out = Path(ns.import_dir or Path("runs") / f"{ns.source}-{paths[0].stem}")
    imported, run_dir = import_files(ns.source, paths, out)
    print(describe(imported, run_dir), file=sys.stderr)
    return run_dir


def not_a_run_dir(path: str) -> str | None:
    """What is wrong with ``path`` as a run directory when it is not a folder at all, in one
    line with what to give instead (a folder's own problems are :class:`RunDirError`'s)."""
    given = Path(path)
    if given.is_dir():
        return None
    if given.is_file():
        holder = given.parent if (given.parent / "run.json").is_file() else None
        instead = f"give its folder: loadknee analyze {holder}" if holder else (
            "give the run directory (runs/<run_id>), or another tool's results with --from"
        )  # fmt: skip
        return f"{path} is a file, not a run directory: {instead}"
    return f"no such run directory: {path} (loadknee run writes them under runs/<run_id>)"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)

    def progress(message: str) -> None:
        if not ns.quiet:
            print(f"[analyze] {message}", file=sys.stderr, flush=True)

    try:
        knee_overrides = KneeParams.given(ns)
        typed = KneeParams.from_cli_args(ns)
        rec_params = RecommendParams.from_cli_args(ns)
        slo_params = SloParams.from_cli_args(ns, sla_ms=typed.sla_ms, tail=typed.tail_percentile)
        cluster = ClusterParams.from_cli_args(ns)
    except (TypeError, ValueError, OSError) as exc:
        parser.error(str(exc))
    if ns.nvidia_smi_csv and not Path(ns.nvidia_smi_csv).is_file():
        print(f"loadknee analyze: no such nvidia-smi file: {ns.nvidia_smi_csv}", file=sys.stderr)
        return 2
    if ns.source:
        try:
            ns.run_dir = _imported_run_dir(ns)
        except (ImportFormatError, ValueError) as exc:
            print(f"loadknee analyze: {exc}", file=sys.stderr)
            return 2
    elif len(ns.run_dir) > 1:
        parser.error("one RUN_DIR (several files only with --from)")
    else:
        ns.run_dir = ns.run_dir[0]
        problem = not_a_run_dir(ns.run_dir)
        if problem:
            return fail("loadknee analyze", problem)
    with Painter.start() as painter:  # imports matplotlib while this process analyses
        try:
            analysis = analyze_run(
                ns.run_dir,
                nvidia_smi_csv=ns.nvidia_smi_csv,
                nvidia_smi_tz=ns.nvidia_smi_tz,
                knee_overrides=knee_overrides,
                recommend_params=rec_params,
                slo_params=slo_params,
                progress=progress,
            )
        except RunDirError as exc:
            print(f"loadknee analyze: {exc}", file=sys.stderr)
            print(
                "A run directory is what `loadknee run` (or a locustfile using loadknee_locust) "
                "writes under runs/<run_id>/: run.json, stages.csv and requests.csv at least.",
                file=sys.stderr,
            )
            return 2
        return answer_and_report(analysis, ns, cluster, painter, progress)


def answer_and_report(
    analysis: Analysis,
    ns: argparse.Namespace,
    cluster: ClusterParams,
    painter: Painter,
    progress: Callable[[str], None],
) -> int:
    """Print the answer, then write the report (its PNGs drawn by ``painter``); the exit code."""
    if note := override_note(analysis.knee_overrides):  # the run was judged otherwise while it ran
        print(f"loadknee analyze: {note}", file=sys.stderr)
    # the answer first, then the files: drawing the plots and the page takes longer than the
    # analysis itself, and the answer needs only where the report will be
    paths = report_paths(analysis, ns.out, cluster)
    try:
        print(
            render_stdout(analysis, ns.format, width=ns.width, paths=paths, explain=ns.explain),
            flush=True,
        )
    except BrokenPipeError:
        # `analyze --format json | head` closed the pipe early: that is the reader's choice,
        # not an error; point stdout at devnull so the interpreter's final flush stays quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    progress("writing report files")
    out = report_dir(analysis, ns.out)
    out.mkdir(parents=True, exist_ok=True)
    painter.draw(PlotInputs.of(analysis), out)  # the child draws while the modules below load
    from analysis.report import writer  # the page, the cluster files: not needed for the answer

    writer.write_report(analysis, out, progress=progress, cluster=cluster, painter=painter)
    if analysis.standing.cannot_tell:
        print(
            f"loadknee analyze: {cannot_tell_text(analysis.standing, analysis.knee)}; nothing is "
            "recommended and no cluster file is written",
            file=sys.stderr,
        )
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
