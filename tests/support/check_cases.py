"""Cases shared by the value tests of ``loadknee verify``'s checks, ``loadknee trace``'s headroom
and a curve replay's tracking and break, and by the golden file that pins their words
(tests/analysis/report/test_golden_check_words.py): record tables typed in as data, request logs
and curve-replay runs built here."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd

from analysis.compare.verify import Check, verify_checks
from analysis.diagnosis.facts import SharedHostFact
from analysis.knee.find import find_knee
from analysis.stages.baseline import compute_baseline
from tests.support.knee_frames import sweep
from tests.support.knee_rundir import saturating_run as knee_saturating_run

LEVELS = [4, 8, 12, 16, 24]
BEFORE_TOK = [400.0, 790.0, 1150.0, 1170.0, 1175.0]
BEFORE_P95 = [210.0, 230.0, 260.0, 700.0, 1000.0]
#: verify's re-runs: name → (output tok/s, P95 ms, extra columns) at LEVELS
RERUNS: dict[str, tuple[list[float], list[float], dict]] = {
    "unchanged": (
        [405.0, 780.0, 1120.0, 1180.0, 1170.0], [215.0, 240.0, 270.0, 720.0, 990.0], {}
    ),
    # 6 slots: 8 users already queue; 12 users serve what 6 did
    "half the slots": (
        [400.0, 590.0, 600.0, 600.0, 600.0], [210.0, 420.0, 600.0, 800.0, 1200.0], {}
    ),
    "red line below the knee": (
        [400.0, 780.0, 1150.0, 1170.0, 1170.0], [210.0, 230.0, 260.0, 700.0, 1000.0],
        {"errors": [0, 100, 0, 0, 0]},
    ),
    # the same server beside a test suite on 2 cores: 12.2 % slower at 12 users, still short
    # of its knee
    "slower at 12 users": (
        [400.0, 780.0, 1010.0, 1170.0, 1175.0], [215.0, 240.0, 270.0, 720.0, 990.0], {}
    ),
}  # fmt: skip

#: the re-run's machine overloaded at a level, the server on it: name → (re-run, users, load)
BUSY: dict[str, tuple[str, int, float]] = {
    "slower, machine overloaded at 12 users": ("slower at 12 users", 12, 6.2),
    "slower, machine overloaded at 24 users only": ("slower at 12 users", 24, 6.2),
    "half the slots, machine overloaded at 12 users": ("half the slots", 12, 5.1),
    "unchanged, machine overloaded at 12 users": ("unchanged", 12, 6.2),
}

#: trace: the synthetic server runs 8 requests at once; more users only queue
CAPACITY = 8
E2E_MS = 400.0
#: the first request's time in every log built here (2026-01-05 09:00:00 UTC)
T0 = 1_767_603_600.0


def knee_table(tok, p95, **columns):
    """A record table at :data:`LEVELS` (baseline 100 tok/s, P95 200 ms) and its knee."""
    return knee_table_at(LEVELS, tok, p95, **columns)


def rerun_checks(name: str, overloaded: tuple[SharedHostFact, ...] = ()) -> dict[str, Check]:
    """verify's checks of the re-run ``name`` against the original (interval ±2 %)."""
    tok, p95, columns = RERUNS[name]
    before, before_knee = knee_table(BEFORE_TOK, BEFORE_P95, output_tok_s_hw_pct=[2.0] * 5)
    after, after_knee = knee_table(tok, p95, **columns)
    checks = verify_checks(before, before_knee, after, after_knee, overloaded=overloaded)
    return {c.name: c for c in checks}


def busy_checks(name: str) -> dict[str, Check]:
    """:func:`rerun_checks` of :data:`BUSY`'s case ``name``: a loopback server on 2 CPUs."""
    rerun, users, load = BUSY[name]
    return rerun_checks(rerun, (SharedHostFact(users, load, 2, "127.0.0.1", 1.5),))


def unmeasured_checks() -> tuple[Check, ...]:
    """verify's checks of a re-run that measured 4 users only (the original recommends 12)."""
    before, before_knee = knee_table(BEFORE_TOK, BEFORE_P95)
    after, after_knee = knee_table_at([4], [400.0], [210.0])
    return verify_checks(before, before_knee, after, after_knee)


def knee_table_at(levels, tok, p95, **columns):
    summary = sweep(levels, tok, p95, baseline_tok_s=100.0, baseline_p95_ms=200.0, **columns)
    return summary, find_knee(summary, compute_baseline(None, summary))


def saturating_run(run_dir: Path, levels: tuple[int, ...] = (1, 2, 4, 8, 16, 32)) -> Path:
    return knee_saturating_run(run_dir, capacity=CAPACITY, levels=levels, e2e_ms=E2E_MS)


def request_log(path: Path, intervals: list[tuple[float, float]]) -> Path:
    """A JSONL request log: one request per (start s after T0, duration s), prompts secret."""
    lines = [
        json.dumps(
            {
                "timestamp": T0 + s,
                "duration_s": d,
                "input_tokens": 100,
                "output_tokens": 10,
                "prompt": f"SECRET-TEXT {i}",
            }
        )
        for i, (s, d) in enumerate(intervals)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def arrivals_log(path: Path) -> Path:
    """20 requests/s for 60 s with no durations: in flight by Little's law from the run."""
    path.write_text(
        "".join(f'{{"time": {i * 0.05:.2f}, "input_tokens": 9}}\n' for i in range(1200))
    )
    return path


#: a curve replay's windows: two scales of a two-window log (mean in flight 2 and 4)
WINDOWS = [
    {"stage": i, "scale": s, "log_start_s": 1000.0 + 60 * (i % 2),
     "log_end_s": 1060.0 + 60 * (i % 2), "target_users": u, "curve_mean_users": u}
    for i, (s, u) in enumerate([(1.0, 2), (1.0, 4), (2.0, 4), (2.0, 8)])
]  # fmt: skip
CURVE = {"windows": WINDOWS, "scales": [1.0, 2.0], "log_origin_s": 1000.0, "curve_peak_users": 4}


def curve_run(in_flight: list[int]) -> SimpleNamespace:
    """A curve replay's run read back: stages of 1 s from t = 0; ``in_flight[i]`` requests
    spanning all of stage i."""
    stages = pd.DataFrame(
        {"stage": range(4), "warmup_end_unix_s": [0.0, 1, 2, 3],
         "measure_end_unix_s": [1.0, 2, 3, 4]}
    )  # fmt: skip
    spans = [(i, i + 1.0) for i, n in enumerate(in_flight) for _ in range(n)]
    requests = pd.DataFrame(spans, columns=["start_unix_s", "end_unix_s"])
    return SimpleNamespace(run_info={"curve": CURVE}, stages=stages, requests=requests)


def curve_analysis(verdicts: list[str]) -> Any:
    """A curve replay's analysis: the windows' stages judged ``verdicts``."""
    stages = [
        SimpleNamespace(stage=w["stage"], target_users=w["target_users"], verdict=v)
        for w, v in zip(WINDOWS, verdicts, strict=True)
    ]
    return SimpleNamespace(
        run=SimpleNamespace(run_info={"curve": CURVE}), knee=SimpleNamespace(stages=stages)
    )
