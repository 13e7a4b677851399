"""No verdict without data: empty or mostly-excluded stages are "insufficient data", never
"comfortable", and nothing is recommended from them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from analysis.pipeline import analyze_run
from analysis.report.table import format_text, record_frame
from analysis.stages.data_check import RowsFact
from tests.support.knee_rundir import request_row, stage_row, write_run

T0 = 1_700_000_000.0
LEVELS = (1, 2, 4)


def _rows(stage: int, users: int, start: float, *, n: int, mismatched: int) -> list[dict]:
    rows = []
    for i in range(n):
        bad = i < mismatched
        rows.append(
            request_row(
                stage * 1000 + i,
                stage,
                start + 1.5 + i * 8.0 / n,
                400.0 + 40 * users,
                outcome="length_mismatch" if bad else "ok",
                completion_tokens=17 if bad else 50,
                error="tokens 17 != 50" if bad else "",
            )
        )
    return rows


def _write(path: Path, mismatched_share: dict[int, float], *, empty: bool = False) -> Path:
    stages, requests = [], []
    for stage, users in enumerate(LEVELS):
        start = T0 + stage * 12.0
        stages.append(stage_row(stage, users, start))
        n = 20
        if not empty:
            bad = round(n * mismatched_share.get(stage, 0.0))
            requests += _rows(stage, users, start, n=n, mismatched=bad)
    return write_run(path, stages=stages, requests=requests)


def _analyze_cli(run_dir: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loadknee_locust", "analyze", str(run_dir), "--quiet",
         "--out", str(tmp_path / "report")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("case", ["all length mismatches", "header-only requests.csv"])
def test_no_usable_stage_exits_non_zero_with_no_settings(case: str, tmp_path: Path) -> None:
    run_dir = _write(
        tmp_path / "run",
        dict.fromkeys(range(len(LEVELS)), 1.0),
        empty=case.startswith("header"),
    )
    analysis = analyze_run(run_dir)
    assert [v.verdict for v in analysis.knee.stages] == ["insufficient_data"] * len(LEVELS)
    assert analysis.knee.max_concurrency is None and analysis.knee.base_capacity is None
    keys = {item.key for item in analysis.recommendations.items}
    assert not keys & {"max_concurrency", "base_capacity", "vllm.max_num_seqs"}, keys
    assert analysis.recommendations.server_flags == ()
    if case.startswith("all"):
        # every row missed its lengths (the words, with what to change: the knee_words golden)
        assert analysis.knee.stages[0].reasons[0] == RowsFact("lengths_missed", 20, 20)
    done = _analyze_cli(run_dir, tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "comfortable" not in done.stdout
    assert "insufficient data" in done.stdout
    # words are the product: the error a user reads when no stage is usable
    assert "no stage had enough usable data" in done.stderr


def test_a_mostly_excluded_stage_is_not_judged_and_not_recommended(tmp_path: Path) -> None:
    analysis = analyze_run(_write(tmp_path / "run", {2: 0.75}))
    verdicts = {v.target_users: v for v in analysis.knee.stages}
    assert verdicts[4].verdict == "insufficient_data"
    assert verdicts[4].reasons[0] == RowsFact("lengths_missed", 20, 15)
    assert verdicts[1].verdict != "insufficient_data"
    assert analysis.knee.max_concurrency == 2  # the highest judged stage, not 4


def test_a_minority_of_excluded_rows_is_counted_and_named(tmp_path: Path) -> None:
    analysis = analyze_run(_write(tmp_path / "run", {1: 0.25}))
    stage = next(v for v in analysis.knee.stages if v.target_users == 2)
    assert stage.verdict != "insufficient_data"
    assert RowsFact("some_excluded", 20, 5) in stage.reasons, stage.reasons
    record = record_frame(analysis.summary, analysis.knee)
    text = format_text(record, width=200)
    lines = text.splitlines()
    header = next(ln for ln in lines if "excluded" in ln)
    row = next(ln for ln in lines if ln.split() and ln.split()[0] == "2")
    at = header.index("excluded") + len("excluded")
    assert row[:at].split()[-1] == "5", (header, row)
