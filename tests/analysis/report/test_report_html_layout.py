"""report.html in a real browser at 1400 pixels: the record table reads without scrolling sideways.

Each stage's reasons sit in a row of their own under the stage's figures, folded in a
``<details>``, not in a column the table squeezes to a few characters (which made every row a
screen tall). Measured in headless Debian chromium (``tests/support/browser_support.py``): the table
fits
the window, no cell is narrower than :data:`MIN_CELL_PX`, no row of figures is taller than
:data:`MAX_ROW_PX`, and opening a stage's reasons shows every one of them. A screenshot of the
page is kept under the test's folder for a person to look at.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from analysis.pipeline import Analysis, analyze_run
from analysis.report.stage_reasons import reasons_text
from analysis.report.writer import write_report
from tests.support.browser_support import open_browser, screenshot
from tests.support.report_fixtures import (
    no_global_figures,  # noqa: F401 (autouse fixture)
    write_run_dir,
)

WIDTHS = (1280, 1400, 1920)
MIN_CELL_PX = 28  # "100" at 13 px with padding; a squeezed column was ~10 px a character
MAX_ROW_PX = 60  # two lines of 13 px text with padding; a squeezed row was hundreds


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Analysis]:
    run = write_run_dir(
        tmp_path_factory.mktemp("runs") / "layout", levels=(1, 2, 4, 6, 8, 10, 12, 16)
    )
    analysis = analyze_run(run)
    assert any(v.reasons for v in analysis.knee.stages)  # reasons to place under the rows
    return write_report(analysis)["report.html"], analysis


@pytest.fixture(scope="module")
def report(analysed: tuple[Path, Analysis]) -> Path:
    return analysed[0]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from open_browser(width=1400, height=1200)


MEASURE = """
const table = document.querySelector('table.record');
const box = table.getBoundingClientRect();
const cells = [...table.querySelectorAll('tr.stage > td, thead th')].map(
  c => c.getBoundingClientRect().width);
const rows = [...table.querySelectorAll('tr.stage')].map(r => r.getBoundingClientRect().height);
return {right: box.right, viewport: document.documentElement.clientWidth,
        scroll: document.documentElement.scrollWidth,
        narrowest: Math.min(...cells), tallest: Math.max(...rows), rows: rows.length,
        why: table.querySelectorAll('tr.why details').length};
"""


@pytest.mark.parametrize("width", WIDTHS)
def test_the_record_table_fits_and_its_rows_stay_short(report, browser, width, tmp_path) -> None:
    browser.set_window_size(width, 1200)
    browser.get(report.as_uri())
    m = browser.execute_script(MEASURE)
    screenshot(browser, tmp_path, f"report-{width}")
    assert m["rows"] == 9 and m["why"] >= 1, m
    assert m["right"] <= m["viewport"] and m["scroll"] <= m["viewport"], m  # no sideways scroll
    assert m["narrowest"] >= MIN_CELL_PX, m
    assert m["tallest"] <= MAX_ROW_PX, m


def test_every_stages_reasons_open_under_its_row(analysed, browser) -> None:
    report, analysis = analysed
    browser.get(report.as_uri())
    shown = browser.execute_script(
        """
        const out = {};
        for (const row of document.querySelectorAll('table.record tr.why')) {
          const d = row.querySelector('details');
          d.open = true;
          out[row.dataset.stage] = [...d.querySelectorAll('li')].map(li => li.textContent);
        }
        return out;
        """
    )
    for verdict in analysis.knee.stages:
        said = list(reasons_text(verdict))
        assert shown[str(verdict.stage)][: len(said)] == said
