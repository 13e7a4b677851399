"""Comparisons: kind detection from run.json, each kind's reading, the table, and the CLI."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from analysis.compare.cli import format_markdown, format_text, main
from analysis.compare.core import RunSide, compare_runs, detect_kind, lookup
from analysis.compare.facts import (
    LITTLE_PREFIX_GAIN,
    SHARED_BOTTLENECK_EFFICIENCY,
    BatchAtFlight,
    BatchBest,
    ConfigCheck,
    ConfigMove,
    Note,
    PrefixChange,
    PrefixGain,
    ReplayBuffer,
    ReplayGap,
    ReplicaScaling,
)
from analysis.compare.verify import Check, all_passed, format_checks, verify_checks
from analysis.model import VERDICT_LABELS
from analysis.pipeline import analyze_run
from analysis.report.table import format_csv
from tests.support.compare_cases import (
    FIXED,
    REPLAY,
    batch_sides,
    broken_after,
    compare_side,
    replay_sides,
)
from tests.support.report_fixtures import write_run_dir

_side = compare_side


def test_lookup_finds_nested_keys_by_suffix() -> None:
    info = {"parameters": {"llm_batch_size": 4}, "prompt_source": {"kind": "fixed"}}
    assert lookup(info, "llm_batch_size") == 4
    assert lookup(info, "prompt_source.kind") == "fixed"
    assert lookup(info, "replicas") is None


@pytest.mark.parametrize(
    ("infos", "replicas", "kind"),
    [
        ((FIXED, REPLAY), (None, None), "benchmark-vs-replay"),
        ((FIXED, FIXED), (1, 2), "replicas"),
        ((FIXED, {"parameters": {"llm_batch_size": 8}, **FIXED}), (None, None), "batch"),
        ((FIXED, {"prompt_source": {"kind": "fixed", "shared_prefix_tokens": 512}}),
         (None, None), "prefix-cache"),
        ((FIXED, FIXED), (None, None), "config"),
    ],
)  # fmt: skip
def test_detect_kind(infos, replicas, kind) -> None:
    sides = [
        _side(f"r{i}", run_info=info, replicas=n)
        for i, (info, n) in enumerate(zip(infos, replicas, strict=True))
    ]
    assert detect_kind(sides) == kind


def test_benchmark_vs_replay_names_the_long_tail_buffer() -> None:
    result = compare_runs(replay_sides())  # order does not matter: run.json says which is which
    assert result.kind == "benchmark-vs-replay"
    # the long-tail buffer: the benchmark's 24 against the replay's 16 (its words: the golden)
    assert {label: most for label, _, most in result.knees} == {"replay": 16, "bench": 24}
    at16 = result.table[result.table["target_users"] == 16].set_index("label")
    assert at16.loc["replay", "e2e_p99_ms"] == at16.loc["bench", "e2e_p99_ms"]  # P99 1.00×
    assert at16.loc["replay", "output_tok_s"] / at16.loc["bench", "output_tok_s"] == 0.5
    buffer, gap = result.readings
    assert isinstance(buffer, ReplayBuffer) and isinstance(gap, ReplayGap)
    assert (buffer.bench, buffer.replay, buffer.buffer_users) == ("bench", "replay", 8)
    assert buffer.buffer_pct == pytest.approx(100 * 8 / 24)
    assert (gap.users, gap.p99_ratio, gap.tok_s_ratio) == (16, 1.0, 0.5)


@pytest.mark.parametrize(("scale", "shared"), [(1.3, True), (1.95, False)])
def test_replicas_efficiency_and_shared_bottleneck(scale: float, shared: bool) -> None:
    one, two = _side("x1", replicas=1), _side("x2", tok_scale=scale, replicas=2)
    result = compare_runs([two, one], kind="replicas")
    (found,) = result.readings
    assert isinstance(found, ReplicaScaling)
    assert (found.label, found.replicas, found.base_replicas) == ("x2", 2, 1)
    assert found.peak_tok_s == pytest.approx(scale * found.base_peak_tok_s)
    assert found.efficiency == pytest.approx(scale / 2)
    assert found.threshold == SHARED_BOTTLENECK_EFFICIENCY
    assert found.shared_bottleneck is shared


def test_replicas_without_counts_says_how_to_give_them() -> None:
    result = compare_runs([_side("a"), _side("b")], kind="replicas")
    assert result.readings == (Note("replicas-unknown"),)  # its words name --replicas (golden)


def test_config_checks_the_recommended_stage_after_the_change() -> None:
    before = _side("before")  # max_concurrency 24
    good = compare_runs([before, _side("after")], kind="config")
    moved, held = good.readings
    assert isinstance(moved, ConfigMove) and isinstance(held, ConfigCheck)
    assert (moved.max_users.before, moved.max_users.after) == (24, 24)
    assert (held.users, held.tested, held.verdict, held.holds) == (24, True, "critical", True)
    bad = compare_runs([before, broken_after()], kind="config")
    broke = bad.readings[-1]
    assert isinstance(broke, ConfigCheck)
    assert (broke.users, broke.verdict, broke.holds) == (24, "knee", False)


def test_batch_aligns_on_prompts_in_flight() -> None:
    result = compare_runs(batch_sides())
    assert result.kind == "batch"
    _, rows = _wide(result)  # one row per prompts in flight, not per users
    assert [int(row[0]) for row in rows] == sorted(set(result.table["in_flight"]))
    assert set(result.table.loc[result.table["label"] == "b4", "in_flight"]) == {
        16,
        64,
        96,
        128,
        192,
    }
    (flight,) = [r for r in result.readings if isinstance(r, BatchAtFlight)]
    assert flight.in_flight == 16  # b1 at 16 users, b4 at 4
    assert [p.label for p in flight.points] == ["b1", "b4"]
    best = {r.label: r for r in result.readings if isinstance(r, BatchBest)}
    assert (best["b4"].batch_size, best["b4"].users, best["b4"].in_flight) == (4, 32, 128)


def _wide(result):
    from analysis.compare.cli import wide_rows

    header, rows = wide_rows(result)
    return header[0], rows


def test_prefix_cache_reports_gain_and_flags_little_gain() -> None:
    result = compare_runs([_side("off"), _side("on", tok_scale=1.02)], kind="prefix-cache")
    gain, change = result.readings
    assert isinstance(gain, PrefixGain) and isinstance(change, PrefixChange)
    assert gain.peak_tok_s_ratio == pytest.approx(1.02)
    assert gain.threshold == LITTLE_PREFIX_GAIN and gain.little_gain
    assert change.change.peak_tok_s_ratio == pytest.approx(1.02)


def test_renderings_have_every_run_and_level() -> None:
    result = compare_runs([_side("a"), _side("b", tok_scale=2.0)])
    md = format_markdown(result)
    assert "| users | a P50 s |" in md and "b verdict" in md
    assert "| 48 |" in md and VERDICT_LABELS["red_line"] in md
    rows = list(csv.DictReader(io.StringIO(format_csv(result.table))))
    assert len(rows) == 10 and rows[4]["e2e_p99_ms"] == ""  # the OOM stage: empty, never 0
    assert "knees:" in format_text(result)


def test_compare_cli_on_two_run_dirs(tmp_path: Path, capsys) -> None:
    a = write_run_dir(tmp_path / "a", levels=(1, 2, 4, 8), slots=2, with_gpu=False)
    b = write_run_dir(tmp_path / "b", levels=(1, 2, 4, 8), slots=6, with_gpu=False)
    out = tmp_path / "cmp"
    code = main([str(a), str(b), "--labels", "before,after", "--out", str(out), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    sides = [_analysed("before", a), _analysed("after", b)]
    comparison = compare_runs(sides)
    assert comparison.kind == "config"
    assert format_text(comparison) in printed  # the table, the knees and the reading
    assert "[before]" in printed and "P99 s" in printed
    assert (out / "compare.md").read_text() == format_markdown(comparison)
    assert len((out / "compare.csv").read_text().splitlines()) == 1 + 8


def test_compare_cli_bad_dir_exits_2(tmp_path: Path, capsys) -> None:
    a = write_run_dir(tmp_path / "a", levels=(1,), with_gpu=False, with_server_metrics=False)
    assert main([str(a), str(tmp_path / "missing"), "--quiet"]) == 2
    err = capsys.readouterr().err
    # words are the product: the refusal a user reads for a bad run directory
    assert "cannot analyse" in err and "missing" in err and "Traceback" not in err


def _analysed(label: str, run_dir: Path) -> RunSide:
    analysis = analyze_run(run_dir)
    return RunSide(label, analysis.summary, analysis.knee, analysis.run.run_info, run=analysis.run)


def _checks(before: RunSide, after: RunSide) -> tuple[Check, ...]:
    return verify_checks(before.summary, before.knee, after.summary, after.knee)


def test_compare_config_prints_the_verify_checks_and_exits_1_on_a_failure(
    tmp_path: Path, capsys
) -> None:
    a = write_run_dir(tmp_path / "a", levels=(1, 2, 4, 8), slots=6, with_gpu=False)
    b = write_run_dir(tmp_path / "b", levels=(1, 2, 4, 8), slots=2, with_gpu=False)
    out = tmp_path / "cmp"
    assert main([str(a), str(a), "--labels", "x,y", "--out", str(out), "--quiet"]) == 0
    same = _checks(_analysed("x", a), _analysed("y", a))
    assert len(same) == 3 and all_passed(same)
    assert format_checks(same) in capsys.readouterr().out
    code = main([str(a), str(b), "--labels", "before,after", "--out", str(out), "--quiet"])
    printed = capsys.readouterr().out
    assert code == 1, printed
    checks = _checks(_analysed("before", a), _analysed("after", b))
    failed = {c.name for c in checks if not c.passed}
    assert failed and failed <= {"recommended_level", "throughput"}
    block = format_checks(checks)
    assert block in printed  # every PASS/FAIL line and the overall FAIL
    head = printed[: printed.index(block)].splitlines()[-1]  # which run against which
    assert head.index("after") < head.index("before")
