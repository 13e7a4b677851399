"""Golden output: the words of ``loadknee verify``'s PASS/FAIL checks, of ``loadknee trace``'s
headroom and of a curve replay's tracking and break, on the cases whose values
tests/loadknee_locust/commands/test_verify.py and tests/analysis/traffic/test_traffic_cli.py,
test_curve_headroom.py assert (:mod:`tests.support.check_cases`).

Those tests assert on the numbers (the checks' levels, verdicts and percentages; trace.json's
capacity and headroom); this file pins what they say, in
``tests/support/data/golden/check_words.txt``. When a rewording is intended, regenerate it with
the other golden files and review the diff:

    LOADKNEE_UPDATE_GOLDEN=1 python -m pytest -n 0 tests/analysis/report/test_golden_check_words.py
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

from analysis.compare.verify import format_checks
from analysis.traffic import cli
from analysis.traffic.curve_headroom import replay_break, tracking
from tests.support.check_cases import (
    BUSY,
    RERUNS,
    arrivals_log,
    busy_checks,
    curve_analysis,
    curve_run,
    request_log,
    rerun_checks,
    saturating_run,
    unmeasured_checks,
)
from tests.support.golden import check_golden

#: trace cases: name → (the run's levels, the log's (start s, duration s) requests)
LOGS: dict[str, tuple[tuple[int, ...], list[tuple[float, float]]]] = {
    "peak 5 with a burst": (
        (1, 2, 4, 8, 16, 32),
        [(float(i), 1.5) for i in range(60)] + [(10.0 + 0.1 * k, 1.0) for k in range(3)],
    ),
    "no knee up to 4": ((1, 2, 4), [(0.0, 2.0), (1.0, 2.0)]),
    "tested below the peak": ((1, 2), [(0.0, 2.0), (0.5, 2.0), (1.0, 2.0)]),
    "peak past the knee": ((1, 2, 4, 8, 16, 32), [(0.1 * k, 2.0) for k in range(12)]),
}


def _trace_words(tmp: Path, name: str) -> list[str]:
    """The headroom lines ``loadknee trace --against`` prints for the case ``name``."""
    levels, intervals = LOGS[name]
    run = saturating_run(tmp / "run", levels=levels)
    log = request_log(tmp / "prod.jsonl", intervals)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        rc = cli.main([str(log), "--against", str(run), "--no-plot", "--out", str(tmp / "out"),
                       "--tz", "UTC"])  # fmt: skip
    assert rc == 0
    lines = printed.getvalue().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("headroom"))
    return [line.rstrip() for line in lines[first:] if not line.startswith("wrote ")]


def _little(tmp: Path) -> str:
    """The in-flight line of a log with no durations, against the run's light-load latency."""
    run = saturating_run(tmp / "run")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        rc = cli.main([str(arrivals_log(tmp / "arrivals.jsonl")), "--against", str(run),
                       "--no-plot", "--out", str(tmp / "out"), "--tz", "UTC"])  # fmt: skip
    assert rc == 0
    return next(line for line in printed.getvalue().splitlines() if line.startswith("in flight"))


def _text_of(found: Any) -> str:
    assert found is not None
    return str(found.text)


def _text(tmp: Path) -> str:
    lines = []
    for name in RERUNS:
        checks = format_checks(list(rerun_checks(name).values()))
        lines += [f"verify, {name}: {line}" for line in checks.splitlines()]
    lines += [f"verify, not measured again: {c.name}: {c.text}" for c in unmeasured_checks()]
    for name in BUSY:
        checks = format_checks(list(busy_checks(name).values()))
        lines += [f"verify, {name}: {line}" for line in checks.splitlines()]
    for name in LOGS:
        lines += [f"trace, {name}: {line.strip()}" for line in _trace_words(tmp / name, name)]
    lines.append(f"trace, in flight by Little's law: {_little(tmp / 'little')}")
    for name, in_flight in {"followed": [2, 4, 4, 8], "fell behind": [1, 3, 4, 5]}.items():
        lines.append(f"curve replay, {name}: {_text_of(tracking(curve_run(in_flight)))}")
    for name, verdicts in {
        "knee at ×2": ["comfortable"] * 3 + ["knee"],
        "held": ["comfortable"] * 4,
    }.items():
        lines.append(f"curve break, {name}: {_text_of(replay_break(curve_analysis(verdicts)))}")
    return "\n".join(lines) + "\n"


def test_every_check_and_headroom_has_its_golden_words(tmp_path: Path) -> None:
    text = _text(tmp_path)
    check_golden("check_words.txt", text)
