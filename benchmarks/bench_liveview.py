"""What the live web view costs the master's gevent hub per poll.

The Knee tab (and ``/loadknee/live``) fetches the live fragment every 2 s per open browser tab;
Flask serves it on the master's hub, the same thread that times the streams of a local run. The
fragment caches its per-stage charts until a stage closes and redraws the telemetry charts at
most every 5 s (``TELEMETRY_EVERY_S``), so three costs matter, measured here side by side on one
run state (a 9-stage sweep with 20 000 rows, 30 minutes of 0.5 s scrapes in
``server_metrics.csv`` and ``gpu.csv``):

* a cached poll (status, banners, verdict table; charts from the cache);
* a poll that redraws the telemetry charts (every 5 s at most), tailing the new CSV rows;
* a poll after a stage closed (stage charts redrawn once);
* the first poll of a view, which reads the telemetry files whole.

It prints milliseconds per call and the share of the hub each takes at its rate (one tab).

    .venv/bin/python benchmarks/bench_liveview.py

Measured (2 shared cores, a test suite running beside it): a cached poll 0.10 ms, a telemetry
redraw 2.9 ms (0.06 % of the hub at one per 5 s), a stage-chart redraw 0.85 ms once per stage,
the first poll 25 ms once. Drawing stays on the hub (moving it to a thread would cost more than
it takes); the streams' token times come from the kernel's receive stamps, so even the 25 ms of
the first poll does not move a measured time.
"""

from __future__ import annotations

import csv
import random
import tempfile
import time
from pathlib import Path

from loadknee_core.contract import GPU_COLUMNS, SERVER_METRIC_COLUMNS
from loadknee_locust.record.recorder import RunLog
from loadknee_locust.sweep.refine import LiveVerdict, StageJudgement
from loadknee_locust.sweep.schedule import Schedule, SchedulePlan
from loadknee_locust.webui.liveview import TELEMETRY_EVERY_S, LiveView

T0 = 1_800_000_000.0
POLL_S = 2.0


def _run_state(run_dir: Path) -> tuple[RunLog, LiveVerdict]:
    plan = SchedulePlan((1, 2, 4, 8, 16, 32), stage_seconds=60.0, warmup_seconds=5.0,
                        cooldown_seconds=2.0, baseline_requests=0, refine=False,
                        stop_after_knee=-1)  # fmt: skip
    run = RunLog(run_dir)
    run.schedule = sched = Schedule(plan, T0)
    rng = random.Random(0)
    now = T0
    while not sched.finished and now < T0 + 1_800:
        now += 0.5
        sched.advance(now)
        run.add_stages(sched.pop_closed())
        users = sched.position().users
        for _ in range(users // 4 + 1):  # about 20 000 rows over the sweep
            e2e = rng.uniform(0.5, 3.0)
            run.add({"start_unix_s": now - e2e, "end_unix_s": now, "outcome": "ok",
                     "e2e_ms": e2e * 1000, "ttft_ms": 80.0, "completion_tokens": 64,
                     "request_id": f"r{rng.random()}"})  # fmt: skip
    stages = tuple(StageJudgement(i, u, "comfortable") for i, u in enumerate(plan.levels))
    return run, LiveVerdict(16, None, 8, knee_stage=4, stages=stages)


def _telemetry(run_dir: Path, seconds: float) -> None:
    with (run_dir / "server_metrics.csv").open("w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=SERVER_METRIC_COLUMNS)
        out.writeheader()
        for i in range(int(seconds / 0.5)):
            t = T0 + i * 0.5
            out.writerow({"timestamp_unix_s": t, "metric": "vllm:gpu_cache_usage_perc",
                          "value": 0.3})  # fmt: skip
            out.writerow({"timestamp_unix_s": t, "metric": "vllm:num_requests_waiting",
                          "value": i % 7})  # fmt: skip
    with (run_dir / "gpu.csv").open("w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=GPU_COLUMNS)
        out.writeheader()
        for i in range(int(seconds / 0.5)):
            out.writerow({"timestamp_unix_s": T0 + i * 0.5, "gpu_index": 0,
                          "memory_used_mib": 70_000, "memory_total_mib": 81_920})  # fmt: skip


def _per_call_ms(fn, n: int) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1000.0


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        run, verdict = _run_state(run_dir)
        run.flush()
        _telemetry(run_dir, 1_800)
        view = LiveView()
        now = T0 + 1_800
        view.fragment(run, None, verdict, None, now=now)  # the first poll reads the whole files
        cached = _per_call_ms(lambda: view.fragment(run, None, verdict, None, now=now), 200)

        def telemetry_poll() -> None:
            view._tele_at = 0.0  # due: redraw (the tail reads only rows added since)
            view.fragment(run, None, verdict, None, now=now)

        tele = _per_call_ms(telemetry_poll, 50)

        def stage_poll() -> None:
            view._stage_key = None  # a stage closed: the stage charts are redrawn
            view.fragment(run, None, verdict, None, now=now)

        stage = _per_call_ms(stage_poll, 50)
        first = _per_call_ms(lambda: LiveView().fragment(run, None, verdict, None, now=now), 5)
        run.close()
    print(f"{'poll':<38}{'ms/call':>9}{'hub share (one tab)':>22}")
    print(f"{'cached (every 2 s)':<38}{cached:>9.2f}{cached / 1000 / POLL_S:>21.2%}")
    print(f"{'telemetry redraw (every 5 s at most)':<38}{tele:>9.2f}"
          f"{(tele - cached) / 1000 / TELEMETRY_EVERY_S:>21.2%}")  # fmt: skip
    print(f"{'stage charts redraw (once per stage)':<38}{stage:>9.2f}{'(once)':>22}")
    print(f"{'first poll (reads 30 min of CSV)':<38}{first:>9.2f}{'(once)':>22}")


if __name__ == "__main__":
    main()
