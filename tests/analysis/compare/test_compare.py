"""Comparisons: kind detection from run.json, each kind's reading, the table, and the CLI."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from analysis.compare.cli import format_csv, format_markdown, format_text, main
from analysis.compare.core import compare_runs, detect_kind, lookup
from analysis.model import VERDICT_LABELS
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
    assert detect_kind(sides)[0] == kind


def test_benchmark_vs_replay_names_the_long_tail_buffer() -> None:
    result = compare_runs(replay_sides())  # order does not matter: run.json says which is which
    assert result.kind == "benchmark-vs-replay"
    # the long-tail buffer: the benchmark's 24 against the replay's 16 (its words: the golden)
    assert {label: most for label, _, most in result.knees} == {"replay": 16, "bench": 24}
    at16 = result.table[result.table["target_users"] == 16].set_index("label")
    assert at16.loc["replay", "e2e_p99_ms"] == at16.loc["bench", "e2e_p99_ms"]  # P99 1.00×
    assert at16.loc["replay", "output_tok_s"] / at16.loc["bench", "output_tok_s"] == 0.5


@pytest.mark.parametrize(("scale", "shared"), [(1.3, True), (1.95, False)])
def test_replicas_efficiency_and_shared_bottleneck(scale: float, shared: bool) -> None:
    one, two = _side("x1", replicas=1), _side("x2", tok_scale=scale, replicas=2)
    result = compare_runs([two, one], kind="replicas")
    (text,) = result.interpretations
    assert f"efficiency {scale / 2:.2f}" in text
    assert ("shared bottleneck" in text) is shared


def test_replicas_without_counts_says_how_to_give_them() -> None:
    result = compare_runs([_side("a"), _side("b")], kind="replicas")
    assert "--replicas" in result.interpretations[0]


def test_config_checks_the_recommended_stage_after_the_change() -> None:
    before = _side("before")  # max_concurrency 24
    good = compare_runs([before, _side("after")], kind="config")
    assert any("the table holds" in t for t in good.interpretations)
    bad = compare_runs([before, broken_after()], kind="config")
    assert any("broke the table" in t for t in bad.interpretations)


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
    assert any("at 16 prompts in flight" in t for t in result.interpretations)


def _wide(result):
    from analysis.compare.cli import wide_rows

    header, rows = wide_rows(result)
    return header[0], rows


def test_prefix_cache_reports_gain_and_flags_little_gain() -> None:
    result = compare_runs([_side("off"), _side("on", tok_scale=1.02)], kind="prefix-cache")
    assert "peak tok/s 1.02×" in result.interpretations[0]
    assert "Little gain" in result.interpretations[0]


def test_renderings_have_every_run_and_level() -> None:
    result = compare_runs([_side("a"), _side("b", tok_scale=2.0)])
    md = format_markdown(result)
    assert "| users | a P50 s |" in md and "b verdict" in md
    assert "| 48 |" in md and VERDICT_LABELS["red_line"] in md
    rows = list(csv.DictReader(io.StringIO(format_csv(result))))
    assert len(rows) == 10 and rows[4]["e2e_p99_ms"] == ""  # the OOM stage: empty, never 0
    assert "knees:" in format_text(result)


def test_compare_cli_on_two_run_dirs(tmp_path: Path, capsys) -> None:
    a = write_run_dir(tmp_path / "a", levels=(1, 2, 4, 8), slots=2, with_gpu=False)
    b = write_run_dir(tmp_path / "b", levels=(1, 2, 4, 8), slots=6, with_gpu=False)
    out = tmp_path / "cmp"
    code = main([str(a), str(b), "--labels", "before,after", "--out", str(out), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "comparison: config" in printed and "[before]" in printed and "P99 s" in printed
    assert (out / "compare.md").read_text().startswith("# Comparison (config): before vs after")
    assert len((out / "compare.csv").read_text().splitlines()) == 1 + 8


def test_compare_cli_bad_dir_exits_2(tmp_path: Path, capsys) -> None:
    a = write_run_dir(tmp_path / "a", levels=(1,), with_gpu=False, with_server_metrics=False)
    assert main([str(a), str(tmp_path / "missing"), "--quiet"]) == 2
    err = capsys.readouterr().err
    # words are the product: the refusal a user reads for a bad run directory
    assert "cannot analyse" in err and "missing" in err and "Traceback" not in err


def test_compare_config_prints_the_verify_checks_and_exits_1_on_a_failure(
    tmp_path: Path, capsys
) -> None:
    a = write_run_dir(tmp_path / "a", levels=(1, 2, 4, 8), slots=6, with_gpu=False)
    b = write_run_dir(tmp_path / "b", levels=(1, 2, 4, 8), slots=2, with_gpu=False)
    out = tmp_path / "cmp"
    assert main([str(a), str(a), "--labels", "x,y", "--out", str(out), "--quiet"]) == 0
    assert "verify: PASS (3 of 3 checks passed)" in capsys.readouterr().out
    code = main([str(a), str(b), "--labels", "before,after", "--out", str(out), "--quiet"])
    printed = capsys.readouterr().out
    assert code == 1, printed
    assert "after against before:" in printed
    assert "FAIL  recommended_level" in printed or "FAIL  throughput" in printed
    assert "verify: FAIL" in printed
