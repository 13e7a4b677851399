"""report.html's what-if table: its cells are the predictions at the lengths they name."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from analysis.pipeline import Analysis, analyze_run
from analysis.predict.facts import Workload
from analysis.predict.fit import fit_capacity
from analysis.predict.whatif import predict
from analysis.report.predict_words import BOUND_WORDS, MEMORY_WORDS, bound_text
from analysis.report.whatif_html import HEADERS
from analysis.report.writer import write_report
from tests.support.report_fixtures import write_run_dir


class _WhatIfCells(HTMLParser):
    """The text of each cell of ``<table class="whatif">``, row by row (header row first)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._inside = False
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table" and ("class", "whatif") in attrs:
            self._inside = True
        elif self._inside and tag == "tr":
            self.rows.append([])
        elif self._inside and tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "table":
            self._inside = False
        elif self._inside and tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _table(analysis: Analysis, out: Path) -> list[dict[str, str]]:
    page = write_report(analysis, out)["report.html"].read_text(encoding="utf-8")
    parser = _WhatIfCells()
    parser.feed(page)
    header, *rows = parser.rows
    assert tuple(header) == HEADERS
    return [dict(zip(header, row, strict=True)) for row in rows]


def _capacity(cell: str) -> tuple[int, int, int] | None:
    """``8`` or ``8 (90 % interval 6–10)`` → (point, low, high); ``—`` → None."""
    if cell == "—":
        return None
    m = re.fullmatch(r"(\d+)(?: \(90 % interval (\d+)–(\d+)\))?", cell)
    assert m, cell
    point = int(m[1])
    return point, int(m[2] or point), int(m[3] or point)


@pytest.fixture(scope="module")
def kv_bound(tmp_path_factory) -> tuple[Analysis, list[dict[str, str]]]:
    """The fixture server whose KV gauge reads 90 % with its 6 slots full: KV binds."""
    root = tmp_path_factory.mktemp("whatif")
    analysis = analyze_run(write_run_dir(root / "run", slots=6))
    return analysis, _table(analysis, root / "report")


def test_each_row_is_the_prediction_at_the_lengths_it_names(kv_bound) -> None:
    analysis, rows = kv_bound
    fit = fit_capacity(analysis)
    assert len(rows) == 7
    for row in rows:
        prompt, completion = (float(v) for v in row["prompt + completion tokens"].split(" + "))
        p = predict(fit, Workload(prompt, completion), analysis.knee_params)
        assert p.point is not None and p.refusal is None
        assert _capacity(row["capacity (90 % interval)"]) == (p.point.users, p.low, p.high)
        assert row["binds"] == bound_text(p.point)
        assert row["reach"].startswith("extrapolates") is p.extrapolated


def test_the_lengths_are_the_runs_scaled_one_at_a_time(kv_bound) -> None:
    analysis, rows = kv_bound
    run = fit_capacity(analysis).workload  # 128 + 32 tokens
    lengths = [tuple(float(v) for v in r["prompt + completion tokens"].split(" + ")) for r in rows]
    i, o = run.input_tokens, run.output_tokens
    assert lengths == [(i, o), (i / 2, o), (2 * i, o), (4 * i, o), (i, o / 2), (i, 2 * o),
                       (i, 4 * o)]  # fmt: skip
    assert [r["lengths"].split(" ")[0] for r in rows[1:]] == ["0.5×", "2×", "4×"] * 2


def test_where_kv_binds_longer_prompts_hold_fewer_users(kv_bound) -> None:
    _, rows = kv_bound
    by_change = {r["lengths"]: _capacity(r["capacity (90 % interval)"]) for r in rows}
    as_run = by_change["as run (the model at the run's own lengths)"]
    half, double, quadruple = (by_change[f"{f}× the prompt"] for f in ("0.5", "2", "4"))
    assert all(c is not None for c in (as_run, half, double, quadruple))
    assert half[0] > as_run[0] > double[0] > quadruple[0]  # type: ignore[index]
    # at the run's own lengths the gauge's 90 % with the 6 slots full passes 85 %: memory binds
    # a user before the KV budget; at the others the budget binds with its use at most 85 %
    assert [r["binds"] for r in rows] == [MEMORY_WORDS] + [BOUND_WORDS["kv"]] * 6
    # fewer, shorter prompts: the KV budget holds a larger batch than any stage ran
    half_row = next(r for r in rows if r["lengths"] == "0.5× the prompt")
    assert half_row["reach"].split(":")[0] == "extrapolates"


def test_a_prediction_beyond_twice_the_measured_batch_shows_no_number(tmp_path: Path) -> None:
    # without /metrics no limit is seen (and the run never fills the 16 slots): the step's
    # growth alone sets the capacity, and half the prompt needs a batch far past the 16 users
    # the run reached
    run = write_run_dir(tmp_path / "run", with_server_metrics=False, slots=16, prefill_stalls=True)
    analysis = analyze_run(run)
    rows = {r["lengths"]: r for r in _table(analysis, tmp_path / "report")}
    half = rows["0.5× the prompt"]
    assert half["capacity (90 % interval)"] == "—"
    assert half["reach"].split(":")[0] == "refused"
    fit = fit_capacity(analysis)
    half_prompt = Workload(fit.workload.input_tokens / 2, fit.workload.output_tokens)
    p = predict(fit, half_prompt, analysis.knee_params)
    assert p.refusal == "beyond_measured"


def test_a_model_that_misses_its_own_run_predicts_no_row(tmp_path: Path) -> None:
    # the fixture server whose prefills cost the batch nothing: the model misses its 8 users
    analysis = analyze_run(write_run_dir(tmp_path / "run", slots=12))
    fit = fit_capacity(analysis)
    rows = _table(analysis, tmp_path / "report")
    assert len(rows) == 7
    for row in rows:
        assert row["capacity (90 % interval)"] == "—"
        assert row["reach"].split(":")[0] == "refused"
        prompt, completion = (float(v) for v in row["prompt + completion tokens"].split(" + "))
        p = predict(fit, Workload(prompt, completion), analysis.knee_params)
        assert p.refusal == "model_misfit" and p.misfit is not None and p.misfit.users == 8
