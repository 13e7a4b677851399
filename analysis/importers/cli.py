"""``loadknee import --from TOOL FILE_OR_DIR… --out RUN_DIR``: another tool's results → a run dir.

Exit codes: 0 imported; 2 a file is not the expected format (one line naming the file, the format
expected and what was found) or the arguments are wrong. What a half-written file lost is printed
on stderr and kept in ``run.json``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis.importers import SOURCES, ImportedRun, ImportFormatError, reader
from loadknee_core.command_parser import CommandParser


def add_source_args(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """``--from``: shared by ``loadknee import`` and ``loadknee analyze FILE --from``."""
    parser.add_argument(
        "--from",
        dest="source",
        choices=SOURCES,
        required=required,
        help="the tool that wrote the files: vllm-bench (vllm bench serve --save-result "
        "--save-detailed JSON, one per --max-concurrency, or a vllm bench sweep folder), "
        "guidellm (benchmarks JSON of a concurrent profile), aiperf (one artifact folder "
        "per --concurrency)",
    )


def import_files(source: str, paths: list[Path], out: Path) -> tuple[ImportedRun, Path]:
    """Read ``paths`` with the ``source`` reader and write the run directory ``out``."""
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise ImportFormatError(missing[0], f"a {source} result file or folder", "no such path")
    # the writer here, not at the top: `loadknee analyze` builds its parser from this module,
    # and the answer of a run directory should not wait on importing what writes one
    from analysis.importers.writer import write_run_dir

    imported = reader(source)(paths)
    return imported, write_run_dir(imported, out)


def describe(imported: ImportedRun, run_dir: Path) -> str:
    """The lines printed after an import."""
    levels = ", ".join(f"{lv.concurrency} ({len(lv.requests)} requests)" for lv in imported.levels)
    lines = [
        f"imported {imported.tool} {imported.tool_version}: levels {levels}",
        f"start times: {imported.start_times}",
        *(f"note: {n}" for n in imported.notes),
        *(f"dropped: {d}" for d in imported.dropped),
        f"run directory: {run_dir}",
    ]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="loadknee import",
        description="Convert another benchmark tool's per-request results into a loadknee run "
        "directory (one stage per concurrency level), then run `loadknee analyze RUN_DIR`.",
    )
    add_source_args(parser, required=True)
    parser.add_argument("paths", nargs="+", metavar="FILE_OR_DIR", type=Path)
    parser.add_argument("--out", required=True, type=Path, metavar="RUN_DIR")
    return parser


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    try:
        imported, run_dir = import_files(ns.source, ns.paths, ns.out)
    except (ImportFormatError, ValueError) as exc:
        print(f"loadknee import: {exc}", file=sys.stderr)
        return 2
    print(describe(imported, run_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
