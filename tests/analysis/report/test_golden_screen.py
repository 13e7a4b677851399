"""Golden output: the terminal text of ``loadknee analyze`` (and ``--explain``) for fixed runs.

The inputs are the closed-form run directories of ``report_fixtures.write_run_dir`` (seeded, so
every number is the same on every machine); the expected text is in ``tests/support/data/golden/``,
with
the run directory's path written as ``<RUN>``. These are the only tests that pin sentences: the
others check values (a signal's name, value, limit and whether it fired).

When a rendering change is intended, regenerate every golden file with one command and review
the diff:

    LOADKNEE_UPDATE_GOLDEN=1 python -m pytest -n 0 tests/analysis/report/test_golden_screen.py
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from analysis.cli import main
from analysis.report.screen import EXPLAIN_HEADING, WIDTH
from tests.support.golden import check_golden
from tests.support.report_fixtures import (
    no_global_figures,  # noqa: F401 (autouse fixture)
    write_run_dir,
)

#: case → (write_run_dir keywords, analyze flags)
CASES: dict[str, tuple[dict, list[str]]] = {
    # 9 stages (baseline + 8 levels), a knee past the 6 slots, server metrics and GPU samples
    "knee9": ({"levels": (1, 2, 4, 6, 8, 10, 12, 16)}, []),
    # the demo's shape: 8 slots bind with the KV cache 15 % used, levels 1-16: the capacity,
    # its interval and the deploy figure are one number, and the fix is a flag to try
    "demo": (
        {"levels": (1, 2, 4, 8, 12, 16), "slots": 8, "kv_full_pct": 15.0, "stage_s": 9.0},
        [],
    ),
    # no telemetry, never saturated: the tested range binds, the fix is to sweep higher
    "unsaturated": ({"levels": (1, 2, 4), "with_gpu": False, "with_server_metrics": False}, []),
    # an SLO on the tail beside the knee, no server metrics
    "slo": (
        {"levels": (1, 2, 4, 6, 8, 12), "with_server_metrics": False},
        ["--slo", "e2e_p95_ms=300"],
    ),
}


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A run folder whose path has the same length on every machine and under any pytest
    ``--basetemp``: the screen wraps the report's path before it is written as ``<RUN>``, so a
    longer temp path moved a line break and failed the comparison (``/tmp/lk-golden-`` and
    mkdtemp's 8 random characters)."""
    base = "/tmp" if os.path.isdir("/tmp") else None
    folder = Path(tempfile.mkdtemp(prefix="lk-golden-", dir=base))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _analyze(tmp_path: Path, case: str, explain: bool, capsys: pytest.CaptureFixture) -> str:
    kwargs, flags = CASES[case]
    run = write_run_dir(tmp_path / case, **kwargs)
    argv = [str(run), "--quiet", *flags, *(["--explain"] if explain else [])]
    assert main(argv) == 0
    return capsys.readouterr().out.replace(str(run), "<RUN>")


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_screen_and_its_explanation(case, tmp_path, capsys) -> None:
    screen = _analyze(tmp_path, case, False, capsys)
    check_golden(f"{case}.txt", screen)
    explained = _analyze(tmp_path, case, True, capsys)
    check_golden(f"{case}.explain.txt", explained)
    # the explanation comes below the same screen; the screen is one screen, narrow enough
    assert explained.startswith(screen.rstrip("\n") + "\n\n" + EXPLAIN_HEADING)
    lines = screen.splitlines()
    assert len(lines) <= 30 and max(len(line) for line in lines) <= WIDTH
    assert screen.count("DEPLOY") == 1 and "rule:" not in screen
    assert max(len(line) for line in explained.splitlines()) <= WIDTH


#: case → a recorded simulator run (``tests/support/data/sim_runs/``): a length mix's words, which
#: the closed-form runs above (fixed lengths) never reach
RECORDED = {
    # KV full below the most the server ran, a queue read by the server and by the client
    "kv-mix": "kv-bound-lognormal",
    # no hard limit: the tail read as each request's slowdown
    "compute-mix": "compute-bound-lognormal",
}
SIM_RUNS = Path(__file__).parents[2] / "support" / "data" / "sim_runs"


@pytest.mark.parametrize("case", sorted(RECORDED))
def test_a_recorded_length_mix_explained(case, tmp_path, capsys) -> None:
    run = tmp_path / case
    shutil.copytree(SIM_RUNS / RECORDED[case], run)
    assert main([str(run), "--quiet", "--explain"]) == 0
    check_golden(f"{case}.explain.txt", capsys.readouterr().out.replace(str(run), "<RUN>"))


def test_explain_holds_every_reason_of_knee_json(tmp_path, capsys) -> None:
    explained = _analyze(tmp_path, "knee9", True, capsys)
    doc = json.loads((tmp_path / "knee9" / "report" / "knee.json").read_text())
    flat = " ".join(explained.split())  # the explanation wraps long reasons at WIDTH
    reasons = [r for stage in doc["knee"]["stages"] for r in stage["reasons"]]
    assert reasons
    for reason in reasons:
        assert " ".join(reason.split()) in flat, reason
