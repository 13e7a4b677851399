"""report.html reads top-down (issue 41 item 5): the answer, the throughput and latency plots,
the record table, the warnings, then the detail; a table of contents whose links resolve; the
run's parameters folded, without absolute paths or empty values. The plots stay legible: P95 and
P99 both visible where they coincide, a flat pre-allocated GPU pool named as such, no label
over another. Structure and plot facts only: the words are the golden files'."""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser
from itertools import combinations
from pathlib import Path

import pytest

from analysis.advice.deploy import memory_pressure_pct
from analysis.cli import main
from analysis.knee.find import find_knee
from analysis.report.html import FIRST_PLOTS, SECTIONS
from analysis.report.html_params import local_paths
from analysis.report.plots import PREALLOCATED_LABEL, latency_figure
from analysis.report.slo_plot import interactivity_figure
from tests.support.report_fixtures import (
    no_global_figures,  # noqa: F401 (autouse fixture)
    seed002_baseline,
    seed002_knee,
    seed002_summary,
    write_run_dir,
)

LOCUSTFILE = "/home/someone/projects/bench/locustfile.py"


class _Page(HTMLParser):
    """Each top-level section's id with the tags, attributes and text inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.inside: dict[str, list[tuple[str, dict[str, str | None]]]] = {}
        self.text: dict[str, str] = {}
        self.toc: list[str] = []
        self.ids: set[str] = set()
        self._stack: list[str] = []
        self._in_toc = False
        self._details = 0

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        if tag == "nav" and found.get("id") == "toc":
            self._in_toc = True
        if tag == "a" and self._in_toc:
            self.toc.append(str(found.get("href")))
        if tag == "section":
            self.sections.append(str(found["id"]))
            self.inside[self.sections[-1]] = []
            self.text[self.sections[-1]] = ""
        elif self.sections and self._stack:
            self.inside[self.sections[-1]].append((tag, found))
        if tag == "details":
            self._details += 1
        if tag not in ("meta", "img", "br"):
            self._stack.append(tag)

    def handle_endtag(self, tag):
        self._stack.pop()
        if tag == "nav":
            self._in_toc = False
        if tag == "details":
            self._details -= 1

    def handle_data(self, data):
        if self.sections and self._stack:
            key = self.sections[-1]
            self.text[key] += data if self._details == 0 or key != "metadata" else ""
            if key == "metadata" and self._details:
                self.text["metadata:folded"] = self.text.get("metadata:folded", "") + data


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> tuple[_Page, str]:
    run = write_run_dir(
        tmp_path_factory.mktemp("order") / "run",
        levels=(1, 2, 4, 8, 12, 16),
        slots=8,
        kv_full_pct=15.0,
        stage_s=9.0,
        run_info={"parameters": {"locustfile": LOCUSTFILE, "expect_slaves": None,
                                 "tags": [], "build_path": ""}},
    )  # fmt: skip
    assert main([str(run), "--quiet"]) == 0
    text = (run / "report" / "report.html").read_text(encoding="utf-8")
    parsed = _Page()
    parsed.feed(text)
    return parsed, text


def test_the_sections_come_in_reading_order_and_the_contents_link_each(page) -> None:
    parsed, _ = page
    order = list(SECTIONS)
    assert parsed.sections[:3] == ["answer", "plots", "record"]
    assert parsed.sections == sorted(parsed.sections, key=order.index)  # SECTIONS' order
    assert parsed.toc == [f"#{s}" for s in parsed.sections]
    assert all(link[1:] in parsed.ids for link in parsed.toc)


def test_the_answer_then_the_two_plots_then_the_record_table(page) -> None:
    parsed, _ = page
    answer = parsed.inside["answer"]
    assert [a.get("data-name") for t, a in answer if t == "div" and a.get("data-name")][:3] == [
        "deploy", "capacity", "past",
    ]  # fmt: skip
    assert any(t == "p" and a.get("class") == "why" for t, a in answer)
    # each plot's alt text: its title, then the answer's marks (test_one_answer.py: their words)
    alts = [str(a.get("alt")) for t, a in parsed.inside["plots"] if t == "img"]
    assert [alt.split("; ")[0] for alt in alts] == list(FIRST_PLOTS)
    assert any(t == "table" and a.get("class") == "record" for t, a in parsed.inside["record"])
    assert any(t == "p" and a.get("class") == "legend" for t, a in parsed.inside["record"])
    # the other plots come later, each image once on the page
    later = [a.get("alt") for t, a in parsed.inside.get("more-plots", []) if t == "img"]
    assert later and not set(later) & set(FIRST_PLOTS)


def test_the_run_parameters_are_folded_without_absolute_paths_or_empty_values(page) -> None:
    parsed, text = page
    assert "metadata" in parsed.sections
    tags = [t for t, _ in parsed.inside["metadata"]]
    assert tags.index("details") < tags.index("pre")  # the JSON is inside the fold
    folded = parsed.text["metadata:folded"]
    assert '"locustfile": "locustfile.py"' in folded
    for absent in (LOCUSTFILE, '"expect_slaves"', '"tags"', '"build_path"', "null"):
        assert absent not in folded
    assert "/home/someone" not in text
    assert not re.search(r'"(/[^"\s]+)"', folded), "an absolute path is left"


def test_local_paths_shortens_absolute_paths_and_drops_empty_values() -> None:
    value = {"a": "/srv/x/run.json", "b": None, "c": {"d": "", "e": []}, "f": ["C:\\w\\y.py", 0],
             "g": "http://host:8000/v1", "h": "relative/path.csv", "i": False}  # fmt: skip
    assert local_paths(value) == {
        "a": "run.json", "f": ["y.py", 0], "g": "http://host:8000/v1",
        "h": "relative/path.csv", "i": False,
    }  # fmt: skip


# --- the plots -------------------------------------------------------------------------------


def _line(ax, gid: str):
    return next(line for line in ax.get_lines() if line.get_gid() == gid)


def test_p95_and_p99_are_drawn_apart_so_both_show_where_they_coincide() -> None:
    summary = seed002_summary()
    summary["e2e_p99_ms"] = summary["e2e_p95_ms"]  # the same request at both percentiles
    fig = latency_figure(summary, seed002_knee())
    main_ax = fig.axes[0]
    p95, p99 = _line(main_ax, "e2e_p95_ms"), _line(main_ax, "e2e_p99_ms")
    assert list(p95.get_ydata()) == pytest.approx(list(p99.get_ydata()), nan_ok=True)
    assert p95.get_linestyle() != p99.get_linestyle()
    assert p95.get_marker() != p99.get_marker()
    assert p99.get_markerfacecolor() == "none" and p99.get_zorder() > p95.get_zorder()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"e2e P95", "e2e P99"} <= set(legend)


def _flat_gpu_knee():
    summary = seed002_summary()
    summary["gpu_mem_peak_pct"] = 90.0  # above the 85 % threshold at every stage: a pool
    summary["kv_cache_peak_pct"] = [5.0, 10.0, 20.0, 30.0, 40.0, 50.0]
    return summary, find_knee(summary, seed002_baseline())


def test_a_flat_gpu_pool_is_judged_preallocated_and_drawn_as_such_not_as_pressure() -> None:
    summary, knee = _flat_gpu_knee()
    assert knee.gpu_preallocated
    fired = {s.name for v in knee.stages for s in v.signals if s.fired}
    assert "memory_pressure" not in fired  # the knee read it as no pressure
    right = latency_figure(summary, knee).axes[-1]
    pool = _line(right, "gpu_preallocated")
    assert pool.get_label() == PREALLOCATED_LABEL and pool.get_linestyle() == ":"
    threshold = _line(right, "memory_pressure")
    assert threshold.get_ydata()[0] == memory_pressure_pct(knee)  # the judged threshold
    assert threshold.get_label() and not threshold.get_label().startswith("_")
    # memory that moved is the plain line, named as measured
    moving = latency_figure(seed002_summary(), seed002_knee()).axes[-1]
    assert not seed002_knee().gpu_preallocated
    assert _line(moving, "gpu_mem_peak_pct").get_label() != PREALLOCATED_LABEL
    assert "gpu_preallocated" not in {line.get_gid() for line in moving.get_lines()}


def test_no_stage_label_overprints_another_in_the_interactivity_plot() -> None:
    summary = seed002_summary()
    steps = summary["kind"] != "baseline"
    # the levels past the knee at one spot of the curve, as in the demo (8, 12, 16 users)
    summary.loc[steps, "output_tok_s"] = [300.0, 543.0, 548.0, 549.0, 549.5]
    summary.loc[steps, "tpot_p50_ms"] = [11.0, 14.0, 14.3, 14.1, 14.2]
    fig = interactivity_figure(summary, None)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    labels = [t for t in fig.axes[0].texts if t.get_gid() == "stage_label"]
    boxes = [t.get_window_extent(renderer) for t in labels]
    assert all(not a.overlaps(b) for a, b in combinations(boxes, 2))
    named = [int(n) for t in labels for n in re.findall(r"\d+", t.get_text())]
    assert sorted(named) == sorted(summary.loc[steps, "target_users"].astype(int))


def test_a_knee_json_without_the_pool_flag_reads_back(tmp_path: Path) -> None:
    from analysis.report.knee_json import from_json, to_json

    summary, knee = _flat_gpu_knee()
    text = to_json(summary, knee, seed002_baseline(), None, run_id="r")
    assert from_json(text).knee.gpu_preallocated
    old = text.replace('"gpu_preallocated": true', '"gpu_preallocated_gone": true')
    old = re.sub(r',\s*"gpu_preallocated_gone": true', "", old)
    back = from_json(old).knee
    assert back is not None and back.gpu_preallocated is False
    assert dataclasses.replace(back, gpu_preallocated=True).capacity == knee.capacity


def test_the_timeline_names_a_preallocated_pool_apart(tmp_path: Path) -> None:
    import pandas as pd

    from analysis.report.plots import timeline_figure

    run = write_run_dir(tmp_path / "run")
    frames = {n: pd.read_csv(run / f"{n}.csv") for n in ("stages", "requests", "gpu")}
    labels = {}
    for pool in (False, True):
        fig = timeline_figure(**frames, memory_pressure_pct=85.0, gpu_preallocated=pool)
        labels[pool] = _line(fig.axes[1], "gpu_memory").get_label()
    assert labels[True] != labels[False] and labels[True].startswith(labels[False])
