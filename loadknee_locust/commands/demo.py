"""``loadknee demo``: the whole job on the embedded simulator — sweep, analysis, table, knee.

Starts ``loadknee sim`` on a free loopback port, runs a short stepped sweep against it with
``loadknee run`` (real Locust, in a subprocess), which ends by analysing the run directory as
``loadknee analyze`` does and printing the answer, the record table, the knee and the
recommendations. The
simulator's own saturation model says where the knee should be; the demo prints that prediction
beside the measured answer, so a user can see the method find a knee that is known in advance.

Every step runs in its own process: the simulator is asyncio, Locust is gevent-patched and the
analysis is pandas; none of them runs here (the simulator's launcher, :mod:`..sim.launch`, loads
its modules but never its loop).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

from loadknee_core.command_parser import CommandParser

#: The demo's plan. Every stage must hold the 20 requests and 5 s the analysis asks of a stage
#: before it trusts its percentiles (analysis/diagnosis/failures.py), or the demo warns about
#: itself. The slowest stage is 1 user: a 256 + 32-token request takes about 0.35 s on the
#: ``fast`` preset, so the 14 s stage's 10.5 s window (after loadknee run's default warm-up, a
#: quarter of the stage) holds about 30, room for a machine busy enough to slow the simulator
#: by a third. (At 64 output tokens and 12 s stages the 1-user stage held 13 and warned.)
STAGE_SECONDS = 14.0
OUTPUT_TOKENS = 32
RUN_DIR_RE = re.compile(r"^run directory: (.+)$", re.MULTILINE)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="loadknee demo",
        description="Start the simulator, run a short stepped sweep, analyse it and print the "
        "record table, the knee and the recommended settings (about 3 minutes).",
    )
    parser.add_argument("--preset", default="fast", help="simulator preset (default %(default)s)")
    parser.add_argument(
        "--levels", default="1,2,4,8,16,32", help="concurrency levels (default %(default)s)"
    )
    parser.add_argument(
        "--stage-seconds",
        type=float,
        default=STAGE_SECONDS,
        help="seconds per level, warm-up included (default %(default)s: at 1 user, the 20 "
        "requests a stage needs for its percentiles, with room to spare)",
    )
    parser.add_argument(
        "--warmup-seconds",
        type=float,
        default=None,
        help="warm-up per level (default: as loadknee run, a quarter of the stage)",
    )
    parser.add_argument(
        "--cooldown-seconds",
        type=float,
        default=None,
        help="pause between levels (default: as loadknee run, a quarter of the stage)",
    )
    parser.add_argument(
        "--baseline-requests",
        type=int,
        default=20,
        help="baseline requests: 1 warm-up + N measured (default %(default)s; 20+ for its P95)",
    )
    parser.add_argument(
        "--input-tokens", type=int, default=256, help="prompt tokens (default %(default)s)"
    )
    parser.add_argument(
        "--output-tokens",
        type=int,
        default=OUTPUT_TOKENS,
        help="output tokens (default %(default)s)",
    )
    parser.add_argument(
        "--out", default="runs", help="parent folder of the run directory (default %(default)s)"
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="below the answer, every reason with the rule it follows (as loadknee analyze)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show every Locust log line and Locust's own summary tables (as loadknee run)",
    )
    return parser


def _predicted_knee(preset: str, levels: list[int], input_tokens: int, output_tokens: int) -> str:
    from loadknee_locust.sim.params import PRESETS
    from loadknee_locust.sim.saturation import predicted_knee_level, saturation_concurrency

    params = PRESETS[preset]
    c_star = saturation_concurrency(params, input_tokens, output_tokens)
    level = predicted_knee_level(params, levels, input_tokens, output_tokens)
    if level is None:
        return f"the simulator saturates at {c_star:.1f} concurrent requests: no knee expected"
    below = max((u for u in levels if u < level), default=None)
    refine = (
        f", then refinement between {below} and {level} to pin it just past {c_star:.0f}"
        if below is not None and level - below > 1
        else ""
    )
    return (
        f"the simulator saturates at {c_star:.1f} concurrent requests: expect the knee at "
        f"{level} users on the grid{refine}"
    )


def _given_seconds(flag: str, seconds: float | None) -> list[str]:
    """``[flag, seconds]`` when given; else nothing, so ``loadknee run``'s rule applies."""
    return [] if seconds is None else [flag, f"{seconds:g}"]


def sweep_command(args: argparse.Namespace, url: str) -> list[str]:
    """The ``loadknee run`` the demo runs (and prints) against its simulator at ``url``."""
    return [
        sys.executable, "-m", "loadknee_locust", "run",
        "--host", url,
        "--levels", args.levels,
        "--stage-seconds", f"{args.stage_seconds:g}",
        *_given_seconds("--warmup-seconds", args.warmup_seconds),
        *_given_seconds("--cooldown-seconds", args.cooldown_seconds),
        "--baseline-requests", str(args.baseline_requests),
        "--input-tokens", str(args.input_tokens),
        "--output-tokens", str(args.output_tokens),
        "--out", args.out,
        *(["--verbose"] if args.verbose else []),
        *(["--explain"] if args.explain else []),
    ]  # fmt: skip


def _run_streaming(cmd: list[str]) -> tuple[int, str]:
    """Run ``cmd``, passing its output through line by line as it comes (the sweep's progress
    is the demo's progress), and return its exit code and the whole output (for the run dir)."""
    lines: list[str] = []
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, text=True, bufsize=1, env=os.environ.copy()
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
    return proc.returncode, "".join(lines)


def main(argv: list[str] | None = None) -> int:
    # here, not at the top: the launcher loads the simulator's aiohttp modules (0.3 s), which
    # `loadknee demo --help` and `loadknee reference` (both import this module) never need
    from loadknee_locust.sim.launch import SimProcess

    args = build_parser().parse_args(argv)
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    started = time.monotonic()
    print(f"[demo] starting the simulator (preset {args.preset}) ...", flush=True)
    with SimProcess.start(args.preset, pass_stderr=True) as sim:
        print(f"[demo] simulator at {sim.url}", flush=True)
        print(
            "[demo] " + _predicted_knee(args.preset, levels, args.input_tokens, args.output_tokens),
            flush=True,
        )
        run_cmd = sweep_command(args, sim.url)
        print("[demo] sweep: loadknee " + " ".join(run_cmd[3:]), flush=True)
        returncode, output = _run_streaming(run_cmd)  # the sweep, then its answer
        if returncode not in (0, 3) or not RUN_DIR_RE.search(output):  # 3: cannot tell
            print(f"[demo] the sweep failed (exit {returncode})", file=sys.stderr)
            return 1
    print(f"[demo] done in {time.monotonic() - started:.0f} s", flush=True)
    return returncode
