"""report.html in a real browser says what the screen says (issue 39, item 1): its first tile is
the deploy figure ``loadknee analyze`` printed, and the throughput and latency plots mark that
figure and the capacity under the names the screen uses.

Read as a person reads the page, in headless Debian chromium (``tests/support/browser_support.py``):
the first tile's name and figure as drawn, and each plot's marks from its caption and its image's
alt text (the PNG's legend words, :func:`analysis.report.answer_view.mark_labels`, checked
against the drawn figure in tests/analysis/report/test_one_answer.py). Two runs: the recorded
``slots4-drive`` sweep of a 4-slot simulator (tests/support/recorded_runs.py) and the demo's
shape written by :func:`tests.support.report_fixtures.write_run_dir`.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from analysis.cli import main
from tests.support.browser_support import open_browser, screenshot
from tests.support.report_fixtures import (
    no_global_figures,  # noqa: F401 (autouse fixture)
    write_run_dir,
)

pytestmark = pytest.mark.slow

#: the first tile and the first two plots' marks, as the page shows them
READ = r"""
const card = document.querySelector('.card');  // the first tile
const figures = [...document.querySelectorAll('#plots figure')].map(f => ({
  alt: f.querySelector('img').getAttribute('alt'),
  marks: Object.fromEntries([...f.querySelectorAll('figcaption .mark')].map(
    m => [m.dataset.mark, m.textContent])),
}));
const top = el => el ? el.getBoundingClientRect().top + window.scrollY : null;
// every table whose number cells all read zero: a section that does not apply
const zero = [...document.querySelectorAll('section table')].filter(t => {
  const cells = [...t.querySelectorAll('tbody td')].map(c => c.textContent.trim())
    .filter(v => /^-?[0-9][0-9,.]*\s*%?$/.test(v));
  return cells.length > 0 && cells.every(v => parseFloat(v.replace(/,/g, '')) === 0);
}).map(t => t.closest('section').id);
return {name: card.dataset.name, title: card.querySelector('span').textContent,
        figure: card.querySelector('b').textContent, figures: figures,
        screen: window.innerHeight, width: window.innerWidth,
        tops: {answer: top(card), plot: top(document.querySelector('#plots img')),
               record: top(document.querySelector('table.record'))},
        zero: zero};
"""
SCREEN = re.compile(
    r"DEPLOY: (?P<deploy>\d+) .*\n(?:.*\n)*?capacity (?P<capacity>\d+)\b(?:.|\n  )*?"
    r"first stage past it: (?P<past>\d+) users? \((?P<kind>knee|red line)\)"
)


def _figure(label: str) -> int:
    """The figure a mark's label ends with: ``capacity = deploy (8)`` → 8."""
    found = re.search(r"\((\d+)\)$", label)
    assert found, label
    return int(found.group(1))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from open_browser(width=1400, height=1200)


def _run(source: str, recorded_run, folder: Path) -> Path:
    if source == "demo-shape":
        return write_run_dir(folder / "run", levels=(1, 2, 4, 8, 12, 16), slots=8,
                             kv_full_pct=15.0, stage_s=9.0)  # fmt: skip
    return Path(shutil.copytree(recorded_run(source).path, folder / "run"))  # analyze writes


@pytest.mark.parametrize("source", ["slots4-drive", "demo-shape"])
def test_the_first_tile_and_the_plots_marks_are_the_screens(
    source, recorded_run, browser, tmp_path, capsys
) -> None:
    run = _run(source, recorded_run, tmp_path)
    assert main([str(run)]) == 0
    screen = capsys.readouterr().out
    said = SCREEN.search(screen)
    assert said, screen
    deploy, capacity, past = (int(said[k]) for k in ("deploy", "capacity", "past"))
    browser.get((run / "report" / "report.html").as_uri())
    page = browser.execute_script(READ)
    screenshot(browser, tmp_path, f"answer-{source}")
    # the first tile is the deploy figure, as drawn on the page
    assert (page["name"], page["title"], page["figure"]) == ("deploy", "deploy", str(deploy))
    # both plots under the answer mark the same figures, in their caption and alt text
    assert len(page["figures"]) == 2, page
    for figure in page["figures"]:
        marks = figure["marks"]
        # one mark when deploy and capacity are one figure, else a deploy mark of its own
        assert ("deploy" in marks) == (deploy != capacity), marks
        assert _figure(marks["capacity"]) == capacity, marks
        assert _figure(marks.get("deploy", marks["capacity"])) == deploy, marks
        assert _figure(marks["past"]) == past and said["kind"] in marks["past"], marks
        assert all(text in figure["alt"] for text in marks.values()), figure
    # at 1400 px a reviewer sees the answer, a plot and the record table in the first two
    # screens, and no section of zeros (a workload table that does not apply is left out)
    assert page["width"] == 1400, page["width"]
    tops = page["tops"]
    assert None not in tops.values(), tops
    assert max(tops.values()) < 2 * page["screen"], (tops, page["screen"])
    assert page["zero"] == [], page["zero"]
