"""The report draws and prints the thresholds the run was judged with, the typed flags included:
the memory-pressure line of the plots, the watermark's shares on the page and in the cluster
files' stand-in band."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from analysis.advice.facts import Recommendations
from analysis.advice.recommend import RecommendParams, watermark_band
from analysis.cli import build_parser, main
from analysis.cluster.stages import anchors
from analysis.pipeline import Analysis, analyze_run
from analysis.report.figures import figures
from analysis.report.plot_inputs import PlotInputs
from analysis.report.plots import latency_figure
from loadknee_core.knee_params import KneeParams
from tests.support.report_fixtures import (
    no_global_figures,  # noqa: F401 (autouse fixture)
    write_run_dir,
)

#: thresholds off every default: a place that ignores the flags shows 85 % or 70–80 %
FLAGS = ["--knee-memory-pct", "70", "--watermark-low", "0.5", "--watermark-high", "0.6"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run_dir(tmp_path_factory.mktemp("thresholds") / "run")


@pytest.fixture(scope="module")
def flagged(run_dir: Path) -> Analysis:
    """The run analysed as ``loadknee analyze RUN_DIR FLAGS`` does."""
    ns = build_parser().parse_args([str(run_dir), *FLAGS])
    return analyze_run(
        run_dir,
        knee_overrides=KneeParams.given(ns),
        recommend_params=RecommendParams.from_cli_args(ns),
    )


def _threshold_lines(fig: Figure) -> dict[int, list[float]]:
    """Per axes (by position), the y of each horizontal line across the whole axes."""
    out: dict[int, list[float]] = {}
    for i, ax in enumerate(fig.axes):
        for line in ax.get_lines():
            x, y = (list(map(float, v)) for v in (line.get_xdata(), line.get_ydata()))
            if x == [0.0, 1.0] and len(set(y)) == 1:
                out.setdefault(i, []).append(y[0])
    return out


def test_the_plots_mark_the_memory_threshold_judged_with(flagged: Analysis) -> None:
    assert flagged.knee.params["memory_pressure_pct"] == 70.0
    drawn = {
        name: _threshold_lines(fig)
        for name, (_title, fig) in figures(PlotInputs.of(flagged)).items()
    }
    assert drawn["latency.png"] == {2: [70.0]}  # the memory / KV-cache axis
    assert drawn["timeline.png"] == {1: [70.0], 2: [70.0]}  # the GPU and KV-cache panels


def test_no_threshold_is_drawn_without_a_judgement(flagged: Analysis) -> None:
    assert _threshold_lines(latency_figure(flagged.summary, None)) == {}


def test_the_watermark_shares_used_are_the_ones_given(flagged: Analysis) -> None:
    params = flagged.recommend_params
    assert (params.watermark_low, params.watermark_high) == (0.5, 0.6)
    base = flagged.knee.base_capacity
    assert base is not None
    band = watermark_band(base, params)
    assert list(band) == list(flagged.recommendations.get("production_watermark"))


def test_the_cluster_files_stand_in_band_uses_the_shares_used(flagged: Analysis) -> None:
    """Without a base capacity the watermark is the same shares of ``max_concurrency``."""
    unanchored = dataclasses.replace(
        flagged, recommendations=Recommendations(items=(), server_flags=())
    )
    most = flagged.knee.max_concurrency
    assert most is not None
    marks = anchors(unanchored)
    assert marks.watermark_range == watermark_band(most, flagged.recommend_params)
    assert "50-60 %" in marks.watermark_basis and "70-80" not in marks.watermark_basis


def test_the_report_page_prints_the_shares_and_threshold_of_the_flags(
    run_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    assert main([str(run_dir), "--out", str(out), "--quiet", *FLAGS]) == 0
    judged = json.loads((out / "knee.json").read_text(encoding="utf-8"))["knee"]["params"]
    assert judged["memory_pressure_pct"] == 70.0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "50–60 %" in page and "70–80 %" not in page  # the watermark the flags set
