"""``loadknee trace LOG``: the traffic of a log or public trace before any load, and its headroom.

Prints a short table (arrivals, in flight, burstiness, lengths; with ``--against RUN_DIR`` the
headroom to that run's knee or SLO capacity) and writes ``<log>.trace.json`` and
``<log>.trace.png`` into ``--out``. One streaming pass over the log; no prompt text is read into
any output.
"""

from __future__ import annotations

import argparse
import codecs
import gzip
import json
import math
import os
import sys
from dataclasses import asdict
from pathlib import Path

from analysis.inputs.nvsmi import resolve_tz
from analysis.pipeline import analyze_run
from analysis.traffic.curve_headroom import ReplayBreak, Tracking, replay_break, tracking
from analysis.traffic.headroom import SCALES, Capacity, Headroom, headroom, run_capacity
from analysis.traffic.render import TraceReading, text_lines, to_json
from analysis.traffic.shape import LatencyModel, ShapeParams, traffic_shape
from loadknee_core.command_parser import CommandParser, fail
from loadknee_core.slo_targets import SloParams
from loadknee_core.traces import TRACE_FORMATS, read_trace


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="loadknee trace",
        description="The traffic of a prompt log or public trace (Mooncake, Azure, BurstGPT): "
        "arrival rate, requests in flight, burstiness, lengths; with --against RUN_DIR the "
        "headroom to that run's knee.",
    )
    parser.add_argument("log", metavar="LOG", help="a prompt log with a time field, or a trace")
    parser.add_argument("--format", choices=TRACE_FORMATS, default="auto", help="the log's format")
    parser.add_argument(
        "--tz",
        metavar="ZONE",
        help="the zone of times written without one (e.g. UTC, +08:00, Asia/Shanghai; "
        "default: this machine's)",
    )
    parser.add_argument(
        "--time-unit",
        choices=("auto", "s", "ms", "us", "ns"),
        default="auto",
        help="the unit of numeric times (auto: epoch s/ms/µs/ns told by size, small = seconds)",
    )
    parser.add_argument("--bin-seconds", type=float, default=1.0, help="time bin (merged in pairs "
                        "past 2048 bins)")  # fmt: skip
    parser.add_argument(
        "--reorder-seconds",
        type=float,
        default=60.0,
        help="how far behind the latest start a record may be and still be put back in order",
    )
    parser.add_argument(
        "--latency-seconds",
        type=float,
        help="each request's latency when the log has no end or duration (Little's law); "
        "default with --against: the run's light-load latency",
    )
    parser.add_argument(
        "--against", metavar="RUN_DIR", help="a run directory: the headroom to its knee"
    )
    parser.add_argument(
        "--scales",
        default=",".join(f"{s:g}" for s in SCALES),
        help="traffic growth steps for the first breaking scale",
    )
    parser.add_argument("--out", metavar="DIR", default=".", help="folder for the JSON and PNG")
    parser.add_argument("--no-plot", action="store_true", help="write no PNG")
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
    SloParams.add_cli_args(parser)
    return parser


def _scales(text: str) -> tuple[float, ...]:
    values = tuple(float(part) for part in text.split(",") if part.strip())
    if not values or any(not math.isfinite(v) or v <= 0 for v in values):
        raise ValueError("--scales must be positive numbers, e.g. 1,1.5,2")
    return values


def not_text(path: str) -> str | None:
    """Why ``path`` cannot be a log, in one line, before anything is read or written: missing,
    a folder, or binary (a NUL byte or bytes that are not UTF-8 in its first 8 KiB, after
    gunzip for a ``.gz``)."""
    if not os.path.exists(path):
        return f"no such file: {path}"
    if os.path.isdir(path):
        return f"{path} is a folder: give a log file (JSONL or CSV, or a public trace)"
    try:
        with gzip.open(path) if path.lower().endswith(".gz") else open(path, "rb") as f:
            head = f.read(8192)
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except (OSError, EOFError, UnicodeDecodeError):
        head = b"\0"
    if b"\0" in head:
        return (
            f"{path} is not a text log (binary content): give a JSONL or CSV prompt log or a "
            "public trace (--format lists them); nothing written"
        )
    return None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        tz = resolve_tz(ns.tz)
        scales = _scales(ns.scales)
        slo_params = SloParams.from_cli_args(ns)
        if ns.latency_seconds is not None and not ns.latency_seconds > 0:
            raise ValueError("--latency-seconds must be > 0")
        params = ShapeParams(bin_s=ns.bin_seconds, reorder_s=ns.reorder_seconds)
    except ValueError as exc:
        parser.error(str(exc))
    problem = not_text(ns.log)
    if problem:
        return fail("loadknee trace", problem)
    capacity: Capacity | None = None
    replay: ReplayBreak | None = None
    followed: Tracking | None = None
    if ns.against:
        from analysis.inputs.load import RunDirError

        try:
            analysis = analyze_run(ns.against, slo_params=slo_params)
            capacity = run_capacity(analysis)
            replay = replay_break(analysis, capacity)
            followed = tracking(analysis.run)
        except (RunDirError, OSError, ValueError) as exc:
            print(f"loadknee trace: {ns.against}: {exc}", file=sys.stderr)
            return 2
    latency = None
    if ns.latency_seconds is not None:
        latency = LatencyModel(ns.latency_seconds, f"--latency-seconds {ns.latency_seconds:g}")
    elif capacity is not None:
        latency = capacity.latency
    try:
        read, records = read_trace(ns.log, ns.format, unit=ns.time_unit, tz=tz)
        shape = traffic_shape(records, ShapeParams(params.bin_s, reorder_s=params.reorder_s,
                                                   latency=latency))  # fmt: skip
    except (OSError, ValueError) as exc:
        print(f"loadknee trace: {exc}", file=sys.stderr)
        return 2
    room: Headroom | None = headroom(shape, capacity, scales=scales) if capacity else None
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(ns.log).name
    json_path = out / f"{stem}.trace.json"
    reading = TraceReading(shape, read, room, capacity)
    doc = to_json(reading)
    if replay is not None:
        doc["curve_replay"] = asdict(replay)
    if followed is not None:
        doc["curve_tracking"] = asdict(followed)
    json_path.write_text(
        json.dumps(doc, indent=1) + "\n",
        encoding="utf-8",
    )
    written = [json_path]
    if not ns.no_plot and shape.arrivals:
        from analysis.report.plots import save_png
        from analysis.traffic.plot import traffic_figure

        fig = traffic_figure(shape, room=room, title=f"{stem} ({read.format})")
        written.append(save_png(fig, out / f"{stem}.trace.png"))
    if not ns.quiet:
        for line in text_lines(reading, tz=tz):
            print(line)
        if followed is not None:
            print(followed.text)
        if replay is not None:
            print(replay.text)
        print("wrote " + ", ".join(str(p) for p in written))
    return 0 if shape.requests else 1


if __name__ == "__main__":
    raise SystemExit(main())
