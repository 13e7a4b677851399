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


def _bench():
    spec = importlib.util.spec_from_file_location("bench_analysis_1m", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


@pytest.fixture(scope="module")
def big_run(tmp_path_factory) -> Path:
    """The 1M benchmark's synthetic run (9 step stages and a baseline), at 110k rows."""
    run_dir = tmp_path_factory.mktemp("big") / "run"
    _bench().write_synthetic_run(run_dir, ROWS)
    return run_dir


def test_a_big_run_shows_its_steps_on_stderr(big_run, tmp_path, capsys) -> None:
    code = main([str(big_run), "--out", str(tmp_path / "report"), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = err.splitlines()
    # words are the product: the progress lines a user reads while it runs
    assert f"[analyze] summarising 10 stages, {ROWS:,} requests" in lines
    # words are the product: the progress lines a user reads while it runs
    assert "[analyze] resampling the stages' time windows for the knee's confidence" in lines
    assert lines[-1].startswith("[analyze] ")  # the last step said, before the result
    assert all(line.startswith("[analyze] ") and len(line) <= 100 for line in lines), lines
    assert json.loads(out)["knee"]["max_concurrency"] == 24  # stdout holds the result only


def test_the_benchmark_prints_its_ratio_and_slowest_step(monkeypatch, capsys) -> None:
    """CI prints the benchmark after the tests (issue 43): the ratio and the slowest step are
    the lines a regression shows in; printed, never asserted against a time."""
    bench = _bench()
    monkeypatch.setattr("sys.argv", ["bench", "--rows", "3000", "--repeat", "1", "--no-memory"])
    bench.main()
    lines = capsys.readouterr().out.splitlines()
    # words are the product: the benchmark's printout a reader of CI reads
    assert any(line.startswith("analysis total (analyze_run)") and "× read_csv" in line
               for line in lines), lines  # fmt: skip
    last = lines[-1]
    # words are the product: the benchmark's printout a reader of CI reads
    assert last.startswith("slowest step: ") and "% of the analysis)" in last, last
    steps = [line.strip() for line in lines if line.startswith("  ") and line.endswith(" s")]
    named = last.removeprefix("slowest step: ").rsplit(" ", 6)[0]
    assert any(step.startswith(named[:40]) for step in steps), (named, steps)
