"""Refinement and early stop against the full grid: time spent and distance to the truth.

Runs, side by side in one invocation and against the same kind of simulator (``fast`` preset,
``--max-num-seqs`` per case, one fresh sim per sweep, one sweep at a time so neither steals CPU
from the other), two ``loadknee run`` sweeps with identical stage settings:

* **full grid**: ``--no-refine --stop-after-knee -1`` (today's behaviour before issue 12);
* **default**: refinement and early stop on.

For each it prints the wall time of ``loadknee run``, the stages run, the ``max_concurrency``
that ``loadknee analyze`` recommends, and its distance to the simulator's true saturation
(``saturation_concurrency``); then the time ratio default / full grid. Target (issue 12): at most
70 % of the time, at least as close to the truth.

    .venv/bin/python benchmarks/bench_refine.py [--slots 8,12] [--stage-seconds 4]

Measured (2 shared cores, 4 s stages, 0.5 s cooldowns), before the long-lived judge: 8 slots:
full grid 70.9 s / 10 stages, default 56.3 s / 9 stages, both max_concurrency 8: ratio 0.79.
12 slots: 63.7 s against 61.8 s (0.97), both 16 (+33 %). Each judgement was a fresh child
importing pandas and resampling the knee 200 times (1.5-2.5 s), first asked after the cooldown:
every adaptive stage waited 2.5-3.5 s beyond its cooldown.

With one judge child per sweep (``analysis.live.judge``: pandas loaded once, no resampling),
asked when the stage closes (0.5 s beyond the cooldown, the shape's 1 s tick), in one run:

    slots truth  full grid: s / stages / answer   default: s / stages / answer   ratio
        8     8       69.7 / 10 / 8 (exact)            43.6 /  8 /  8 (exact)     0.63
       12    12       63.6 / 10 / 8 (-33 %)            46.7 /  9 / 12 (exact)     0.73
       40    40       53.6 / 10 / 32 (-20 %)           66.8 / 13 / 40 (exact)     1.25

The fast preset (8 slots) meets the 70 % target. A capacity between grid levels costs the
refine stages that pin it (12: three; 40, a knee near the top of the grid where the early stop
saves only the 64 level: four), and every answer is exact where the full grid was 20-33 % low.

Again after issue 25 (client-side queue, all-stages fit; 2 shared cores at load 6-9), with and
without the simulator's ``/metrics``:

    slots truth  metrics  full grid: s / stages / answer   default: s / stages / answer   ratio
        8     8  shown         69.8 / 10 / 8 (exact)            59.6 /  9 /  8 (exact)     0.85
        8     8  hidden        69.6 / 10 / 8 (exact)            59.7 /  9 /  8 (exact)     0.86
       12    12  shown         63.7 / 10 / 8 (-33 %)            57.6 /  9 / 12 (exact)     0.90
       12    12  hidden        64.8 / 10 / 8 (-33 %)            57.3 /  9 / 12 (exact)     0.88

The 70 % target is missed on the fast preset now: one stage more than before (9, the three refine
stages 8 → 16 needs) and ~1.2 s more per adaptive stage (59.6 / 9 = 6.6 s against 5.5 s). Not
profiled inside the sweep; offline on a 12-stage run the judge's work is summarize_stages 0.66 s
and find_knee 0.16 s (0.03 s without the fit's 200 resamples), a likely part of it.
With refine levels chosen by the fit's capacity interval (issue 27: the interval resolves after
one refine stage), one run on 2 cores at load average ~15 from other jobs:

    slots  metrics  full grid: s / stages / answer   default: s / stages / answer   ratio
        8  shown         72.2 / 10 / 8                    55.6 / 8 / 8                0.77
        8  hidden        70.8 / 10 / 8                    61.4 / 9 / 8                0.87
       12  shown         65.0 / 10 / 8 (-33 %)            53.9 / 8 / 12               0.83
       12  hidden        66.2 / 10 / 8 (-33 %)            46.8 / 7 / 12               0.71

A stage costs about the same either way here (6.7-7.0 s default, 6.5-7.2 s full grid), so the
ratio is the stage count's: the 70 % target needs 7 stages of the full grid's 10 (baseline
included). 8 slots needs at least 7 (1, 2, 4, 8, 16 and one refine stage to anchor the interval),
and on 4 s stages the interval is often too wide to resolve (every stage "too noisy to judge"),
so the sweep falls back to bisection's stage count. The 70 % target was not met in this run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loadknee_locust.sim.launch import SimProcess
from loadknee_locust.sim.params import preset
from loadknee_locust.sim.saturation import saturation_concurrency

INPUT_TOKENS, OUTPUT_TOKENS = 128, 64  # loadknee run's defaults
MODES = {"full grid": ["--no-refine", "--stop-after-knee", "-1"], "default": []}


Result = tuple[float, int, "int | None"]


def sweep(
    slots: int, mode: list[str], stage_s: float, out: Path, run_id: str, metrics: bool = True
) -> Result:
    """(wall seconds, stages run, max_concurrency) of one ``loadknee run`` + ``analyze``;
    ``metrics=False`` hides the simulator's ``/metrics`` (``--no-metrics``)."""
    timing = ["--stage-seconds", f"{stage_s:g}", "--warmup-seconds", "1",
              "--cooldown-seconds", "0.5", "--baseline-requests", "5"]  # fmt: skip
    with SimProcess.start("fast", max_num_seqs=slots, metrics=metrics) as sim:
        t0 = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "loadknee_locust", "run", "--host", sim.url, *timing, *mode,
             "--out", str(out), "--run-id", run_id],
            check=True, capture_output=True, timeout=1200,
        )  # fmt: skip
        wall = time.monotonic() - t0
    run_dir = out / run_id
    subprocess.run(
        [sys.executable, "-m", "loadknee_locust", "analyze", str(run_dir)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    knee = json.loads((run_dir / "report" / "knee.json").read_text())["knee"]
    stages = len((run_dir / "stages.csv").read_text().strip().splitlines()) - 1
    return wall, stages, knee["max_concurrency"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--slots", default="8,12", help="sim --max-num-seqs values (default 8,12)")
    ap.add_argument("--stage-seconds", type=float, default=4.0)
    ap.add_argument(
        "--metrics",
        choices=["both", "shown", "hidden"],
        default="both",
        help="the simulator's /metrics shown, hidden (--no-metrics) or both",
    )
    args = ap.parse_args()
    shows = {"both": (True, False), "shown": (True,), "hidden": (False,)}[args.metrics]
    print(f"{'slots':>5} {'truth':>6} {'mode':>10} {'wall s':>7} {'stages':>6} "
          f"{'max_conc':>8} {'distance':>8}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for slots, shown in ((int(s), m) for s in args.slots.split(",") for m in shows):
            truth = saturation_concurrency(preset("fast", max_num_seqs=slots), INPUT_TOKENS,
                                           OUTPUT_TOKENS)  # fmt: skip
            walls = {}
            label = "metrics shown" if shown else "metrics hidden"
            for name, mode in MODES.items():
                run_id = f"{slots}-{name.replace(' ', '-')}-{'m' if shown else 'h'}"
                wall, stages, got = sweep(
                    slots, mode, args.stage_seconds, Path(tmp), run_id, metrics=shown
                )
                walls[name] = wall
                dist = "n/a" if got is None else f"{(got - truth) / truth * 100:+.0f} %"
                print(f"{slots:>5} {truth:>6g} {name:>10} {wall:>7.1f} {stages:>6} "
                      f"{got!s:>8} {dist:>8}  ({label})", flush=True)  # fmt: skip
            print(
                f"      time ratio default / full grid: {walls['default'] / walls['full grid']:.2f}"
                f" ({label})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
