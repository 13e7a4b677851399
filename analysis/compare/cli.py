"""``loadknee compare RUN_DIR RUN_DIR [...]``: analyse several runs, print and write the comparison.

Each run goes through the same pipeline as ``loadknee analyze`` (same knee thresholds); the
comparison itself is :func:`analysis.compare.core.compare_runs`. This module renders it: a
side-by-side table per concurrency (or per prompts in flight for ``batch``), the knee of each run
and the reading, printed and written to ``compare.md`` and ``compare.csv`` (long form) in ``--out``
(default: ``compare-<label>-vs-<label>`` beside the first run). Exit 2 on a bad run directory or
bad arguments, with a one-paragraph message and no traceback; ``--kind config`` exits as ``loadknee
verify`` does (1 on a failed check, 3 where none failed but one cannot tell).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from analysis.compare.core import KINDS, Comparison, RunSide, compare_runs
from analysis.compare.prefix_cache import prefix_cache_change
from analysis.compare.verify import EXIT_CODES, format_checks, overall, verify_checks
from analysis.diagnosis.failures import overloaded_stages
from analysis.inputs.load import RunDirError
from analysis.knee.find import KneeParams
from analysis.pipeline import analyze_run
from analysis.report.compare_words import kind_reason_text, prefix_change_text, reading_lines
from analysis.report.table import fmt_magnitude, fmt_pct, fmt_text, format_csv
from loadknee_core.command_parser import CommandParser

_WIDE = (
    ("P50 s", "e2e_p50_ms", lambda v: fmt_magnitude(v, 0.001)),
    ("P99 s", "e2e_p99_ms", lambda v: fmt_magnitude(v, 0.001)),
    ("tok/s", "output_tok_s", fmt_magnitude),
    ("mem %", "mem_pct", fmt_pct),
    ("ok %", "success_pct", fmt_pct),
    ("verdict", "verdict", fmt_text),
)


def wide_rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the side-by-side table: users, then each run's key metrics."""
    key = "in_flight" if comparison.kind == "batch" else "target_users"
    header = ["prompts in flight" if key == "in_flight" else "users"]
    header += [f"{label} {name}" for label in comparison.labels for name, _, _ in _WIDE]
    rows = []
    for level in sorted(set(comparison.table[key])):
        cells = [str(level)]
        for label in comparison.labels:
            match = comparison.table[
                (comparison.table["label"] == label) & (comparison.table[key] == level)
            ]
            row = match.iloc[0] if not match.empty else None
            cells += [fmt(None if row is None else row[col]) for _, col, fmt in _WIDE]
        rows.append(cells)
    return header, rows


def format_markdown(comparison: Comparison) -> str:
    header, rows = wide_rows(comparison)
    lines = [
        f"# Comparison ({comparison.kind}): {' vs '.join(comparison.labels)}",
        "",
        f"Kind: {comparison.kind} — {kind_reason_text(comparison.kind, comparison.kind_chosen)}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---:" for _ in header) + "|",
    ]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    lines += ["", "## Knees", ""]
    lines += [
        f"- {label}: knee at {k if k is not None else 'none in range'}, "
        f"max concurrency {m if m is not None else '—'}"
        for label, k, m in comparison.knees
    ]
    lines += ["", "## Reading", ""] + [f"- {text}" for text in reading_lines(comparison.readings)]
    return "\n".join(lines) + "\n"


def format_text(comparison: Comparison) -> str:
    """Aligned table with the run labels on a line of their own above their metric columns."""
    header, rows = wide_rows(comparison)
    short = [header[0]] + [name for _ in comparison.labels for name, _, _ in _WIDE]
    widths = [max(len(r[i]) for r in [short, *rows]) for i in range(len(short))]
    table = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in [short, *rows]]
    groups, per_run = [" " * widths[0]], len(_WIDE)
    for i, label in enumerate(comparison.labels):
        span = sum(widths[1 + i * per_run : 1 + (i + 1) * per_run]) + 2 * (per_run - 1)
        groups.append(f"[{label}]"[:span].center(span, "-"))
    table.insert(0, "  ".join(groups))
    knees = [
        f"  {label}: knee {k if k is not None else 'none in range'}, max concurrency "
        f"{m if m is not None else '—'}"
        for label, k, m in comparison.knees
    ]
    return "\n".join(
        [
            f"comparison: {comparison.kind} "
            f"({kind_reason_text(comparison.kind, comparison.kind_chosen)})",
            "",
            *table,
            "",
            "knees:",
            *knees,
            "",
            "reading:",
            *(f"  - {t}" for t in reading_lines(comparison.readings)),
        ]
    )


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="loadknee compare",
        description="Compare two or more run directories: side-by-side table per concurrency, "
        "the knee of each, and what the difference means (benchmark vs log replay, before vs "
        "after a config change, 1 vs N replicas, batch size vs concurrency, prefix caching).",
    )
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    parser.add_argument("--labels", help="comma-separated names, one per run (default: run ids)")
    parser.add_argument(
        "--kind", choices=KINDS, default="auto", help="what is compared (default: from run.json)"
    )
    parser.add_argument(
        "--replicas",
        help="comma-separated replica count of each run (for --kind replicas), e.g. 1,2",
    )
    parser.add_argument("--out", metavar="DIR", help="folder for compare.md / compare.csv")
    parser.add_argument("--format", choices=["text", "markdown"], default="text")
    parser.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    KneeParams.add_cli_args(parser)
    return parser


def _split(text: str | None, count: int, what: str, parser: argparse.ArgumentParser) -> list[str]:
    if not text:
        return []
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != count:
        parser.error(f"--{what} has {len(parts)} values for {count} runs")
    return parts


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    if len(ns.run_dirs) < 2:
        parser.error("compare needs at least two run directories")
    labels = _split(ns.labels, len(ns.run_dirs), "labels", parser)
    replicas_text = _split(ns.replicas, len(ns.run_dirs), "replicas", parser)
    try:
        replicas = [int(r) for r in replicas_text]
    except ValueError:
        parser.error(f"--replicas must be whole numbers: {ns.replicas}")
    params = KneeParams.from_cli_args(ns)

    def progress(message: str) -> None:
        if not ns.quiet:
            print(f"[compare] {message}", file=sys.stderr, flush=True)

    sides = []
    for i, run_dir in enumerate(ns.run_dirs):
        try:
            analysis = analyze_run(run_dir, knee_params=params, progress=progress)
        except RunDirError as exc:
            print(f"loadknee compare: cannot analyse {run_dir}. {exc}", file=sys.stderr)
            return 2
        sides.append(
            RunSide(
                label=labels[i] if labels else analysis.run_id,
                summary=analysis.summary,
                knee=analysis.knee,
                run_info=analysis.run.run_info,
                replicas=replicas[i] if replicas else None,
                run=analysis.run,
            )
        )
    if len({s.label for s in sides}) < len(sides):
        parser.error("two runs have the same label: pass --labels")
    comparison = compare_runs(sides, kind=ns.kind)
    first = Path(ns.run_dirs[0])
    out = Path(ns.out) if ns.out else first.parent / ("compare-" + "-vs-".join(comparison.labels))
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.md").write_text(format_markdown(comparison), encoding="utf-8")
    (out / "compare.csv").write_text(format_csv(comparison.table), encoding="utf-8")
    written = [out / "compare.md", out / "compare.csv"]
    if comparison.kind == "prefix-cache":  # the change and its intervals, for scripts
        changes = [
            {**change.as_dict(), "sentence": prefix_change_text(change)}
            for change in (prefix_cache_change(sides[0], side) for side in sides[1:])
        ]
        (out / "prefix-cache.json").write_text(
            json.dumps(changes[0] if len(changes) == 1 else changes, indent=2) + "\n",
            encoding="utf-8",
        )
        written.append(out / "prefix-cache.json")
    shown = format_markdown(comparison) if ns.format == "markdown" else format_text(comparison)
    print(shown.rstrip("\n"))
    results = set()
    if comparison.kind == "config":  # before vs after: the same checks as `loadknee verify`
        before = sides[0]
        for after in sides[1:]:
            busy = (
                *overloaded_stages(before.summary, before.run_info),
                *overloaded_stages(after.summary, after.run_info),
            )
            checks = verify_checks(
                before.summary, before.knee, after.summary, after.knee, overloaded=busy
            )
            print(f"\n{after.label} against {before.label}:\n{format_checks(checks)}")
            results.add(overall(checks))
    print(f"\nwritten: {', '.join(str(p) for p in written)}")
    worst = next((r for r in ("FAIL", "CANNOT TELL") if r in results), "PASS")
    return EXIT_CODES[worst]


if __name__ == "__main__":
    raise SystemExit(main())
