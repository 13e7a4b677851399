"""``loadknee analyze`` on a run past 100k rows says on stderr what it is doing, in short lines."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from analysis.cli import main
from tests.support.paths import REPO
from tests.support.report_fixtures import no_global_figures  # noqa: F401 (autouse fixture)

BENCH = REPO / "benchmarks" / "bench_analysis_1m.py"
ROWS = 110_000


@pytest.fixture(scope="module")
def big_run(tmp_path_factory) -> Path:
    """The 1M benchmark's synthetic run (9 step stages and a baseline), at 110k rows."""
    spec = importlib.util.spec_from_file_location("bench_analysis_1m", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    run_dir = tmp_path_factory.mktemp("big") / "run"
    bench.write_synthetic_run(run_dir, ROWS)
    return run_dir


def test_a_big_run_shows_its_steps_on_stderr(big_run, tmp_path, capsys) -> None:
    code = main([str(big_run), "--out", str(tmp_path / "report"), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = err.splitlines()
    assert f"[analyze] summarising 10 stages, {ROWS:,} requests" in lines
    assert "[analyze] resampling the stages' time windows for the knee's confidence" in lines
    assert lines[-1].startswith("[analyze] ")  # the last step said, before the result
    assert all(line.startswith("[analyze] ") and len(line) <= 100 for line in lines), lines
    assert json.loads(out)["knee"]["max_concurrency"] == 24  # stdout holds the result only
