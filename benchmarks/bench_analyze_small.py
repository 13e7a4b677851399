"""Benchmark: ``loadknee analyze`` on a small run, next to ``python -c "import pandas"``.

A user waits on ``analyze`` after every sweep, and ``compare`` and ``verify`` pay it per run; on a
small run the numbers themselves take a fraction of a second, so the command should take about
as long as starting Python with pandas. This measures, in one process, side by side:

1. ``python -c "import pandas"`` (a child process: the floor of any pandas command);
2. ``python -m analysis.cli RUN --out DIR --quiet``, the default command (a child process), and
   in that one run two times: **the answer** — when the last byte of the answer reached stdout
   (``analyze`` prints the answer, then writes the report files; nothing else goes to stdout) —
   and **the whole report** — when the command ended, every file written (record, knee.json,
   PNGs, report.html, cluster files).

The two alternate ``--repeat`` times (default 3) and each keeps its best, so that a neighbour's
burst on a shared machine does not decide a ratio.

Bytecode: pandas' modules were compiled to ``.pyc`` when pip installed them, and on a user's
machine Python caches the project's own modules the same way on their first import. A shell with
``PYTHONDONTWRITEBYTECODE`` set (some sandboxes and CI images set it) would make every ``analyze``
compile loadknee's ~400 modules from source while pandas loads compiled ones: not like with like.
So the children run with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` removed from their
environment), after one untimed warm-up run of each. Without it, on this project's 2-core box,
the answer took 2.3× the pandas import instead of 1.9×. Printed: each best time, the children's CPU
time, and the ratios answer / pandas import and report / pandas import against the targets
(issue 38): answer ≤ 2×, whole report ≤ 5×.

The run: ``--run DIR``, else the demo's run directory (``loadknee demo``: 8-slot simulator,
462 requests, 7 stages) committed as ``benchmarks/data/demo-run.tar.xz`` and unpacked into a
temporary folder, so no simulator, sweep or network is needed. ``--baseline DIR``: compare the
knee.json written with ``DIR/knee.json`` (as parsed JSON: the same keys and numbers) and, with
``--screen FILE``, the answer with FILE, but for its ``report:`` line (where the report is);
exit 1 when either differs.

Run: ``python benchmarks/bench_analyze_small.py [--run DIR] [--repeat 3] [--baseline DIR
[--screen FILE]]`` from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import selectors
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO_RUN = REPO / "benchmarks" / "data" / "demo-run.tar.xz"
#: targets of issue 38, as multiples of the pandas import
ANSWER_TARGET, REPORT_TARGET = 2.0, 5.0
FLOOR_CODE = "import pandas"


@dataclass(frozen=True)
class Timing:
    wall_s: float
    cpu_s: float  # the child's user + system time
    answer_s: float | None = None  # when the last byte of stdout arrived
    stdout: str = ""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def child_env() -> dict[str, str]:
    """This environment with bytecode caching on, as a user's shell has it."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_child(args: list[str]) -> Timing:
    """Run ``args``; its wall and CPU time, and when its stdout last received bytes."""
    cpu = _children_cpu()
    started = time.perf_counter()
    proc = subprocess.Popen(
        args, cwd=REPO, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.stdout is not None
    chunks: list[bytes] = []
    last = None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while True:
            selector.select()
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            last = time.perf_counter() - started
    code = proc.wait()
    wall = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"{' '.join(args)} exited {code}")
    return Timing(wall, _children_cpu() - cpu, last, b"".join(chunks).decode())


def unpack_demo(into: Path) -> Path:
    """The committed demo run, unpacked under ``into``; its run directory."""
    with tarfile.open(DEMO_RUN, "r:xz") as archive:
        archive.extractall(into, filter="data")
        (top,) = {Path(name).parts[0] for name in archive.getnames()}
    return into / top


def _without_report_line(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("report: ")]


def compare(out: Path, answer: str, baseline: Path, screen: Path | None) -> list[str]:
    """What differs from the baseline: knee.json (parsed), the answer (but its report line)."""
    problems = []
    ours = json.loads((out / "knee.json").read_text(encoding="utf-8"))
    theirs = json.loads((baseline / "knee.json").read_text(encoding="utf-8"))
    if ours != theirs:
        keys = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
        problems.append(f"knee.json differs from {baseline}/knee.json in: {', '.join(keys)}")
    if screen is not None:
        expected = _without_report_line(screen.read_text(encoding="utf-8"))
        if _without_report_line(answer) != expected:
            problems.append(f"the answer differs from {screen} (report line aside)")
    return problems


def _ratio_line(name: str, seconds: float, floor: float, target: float) -> str:
    ratio = seconds / floor
    verdict = "within" if ratio <= target else "OVER"
    return f"{name:<34} {seconds:7.3f} s  {ratio:5.2f}× pandas import  ({verdict} {target:g}×)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=None, help="run directory (default: demo's)")
    parser.add_argument("--repeat", type=int, default=3, help="tries of each timing (best kept)")
    parser.add_argument("--baseline", type=Path, default=None, help="folder with a knee.json")
    parser.add_argument("--screen", type=Path, default=None, help="the answer to compare with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-analyze-") as tmp:
        run = args.run or unpack_demo(Path(tmp) / "run")

        def analyze_cmd(out: Path) -> list[str]:
            return [sys.executable, "-m", "analysis.cli", str(run), "--out", str(out), "--quiet"]

        run_child([sys.executable, "-c", FLOOR_CODE])  # warm-up: caches bytecode, not timed
        run_child(analyze_cmd(Path(tmp) / "warm-up"))
        pandas_runs, analyze_runs = [], []
        for attempt in range(args.repeat):
            pandas_runs.append(run_child([sys.executable, "-c", FLOOR_CODE]))
            analyze_runs.append(run_child(analyze_cmd(Path(tmp) / f"report-{attempt}")))
        floor = min(t.wall_s for t in pandas_runs)
        answer = min(t.answer_s or t.wall_s for t in analyze_runs)
        report = min(t.wall_s for t in analyze_runs)
        print(f"run {run} (best of {args.repeat}; load average {os.getloadavg()[0]:.2f})")
        floor_cpu = min(t.cpu_s for t in pandas_runs)
        label = f'python -c "{FLOOR_CODE}"'
        print(f"{label:<34} {floor:7.3f} s  (CPU {floor_cpu:.3f} s)")
        print(_ratio_line("analyze: the answer on stdout", answer, floor, ANSWER_TARGET))
        print(_ratio_line("analyze: the whole report written", report, floor, REPORT_TARGET))
        print(f"{'analyze CPU (user + system)':<34} {min(t.cpu_s for t in analyze_runs):7.3f} s")
        if args.baseline is None:
            return 0
        first = analyze_runs[0].stdout
        problems = compare(Path(tmp) / "report-0", first, args.baseline, args.screen)
        for problem in problems:
            print(f"DIFFERS: {problem}")
        if not problems:
            also = " and the same answer" if args.screen else ""
            print(f"the same knee.json as {args.baseline}{also}")
        return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
