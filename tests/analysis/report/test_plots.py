"""Plots: real PNGs, the expected axes and lines, notes instead of crashes for missing telemetry."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.advice.deploy import memory_pressure_pct
from analysis.report.plots import (
    LATENCY_TITLE,
    THROUGHPUT_TITLE,
    latency_figure,
    png_bytes,
    save_png,
    throughput_figure,
    timeline_figure,
)
from tests.support.report_fixtures import (
    canonical_server_timeline,
    no_global_figures,  # noqa: F401 (autouse fixture)
    seed002_knee,
    seed002_summary,
    write_run_dir,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _marks(ax) -> dict[str, float]:
    """The answer's vertical marks by their ``gid``: name → users."""
    return {str(line.get_gid()): line.get_xdata()[0] for line in ax.get_lines() if line.get_gid()}


def _gids(ax) -> set[str]:
    return {str(line.get_gid()) for line in ax.get_lines() if line.get_gid()}


def _notes(fig) -> set[str]:
    """What the figure's notes say is missing, by their ``gid`` (``no-ttft``, …)."""
    return {str(t.get_gid()) for ax in fig.axes for t in ax.texts if t.get_gid()}


@pytest.fixture(scope="module")
def run_frames(tmp_path_factory) -> dict[str, pd.DataFrame]:
    root = write_run_dir(tmp_path_factory.mktemp("run") / "r")
    frames = {
        name: pd.read_csv(root / f"{name}.csv")
        for name in ("stages", "requests", "gpu", "server_metrics")
    }
    frames["server"] = canonical_server_timeline(frames.pop("server_metrics"))
    return frames


def test_latency_figure_lines_second_axis_and_knee() -> None:
    fig = latency_figure(seed002_summary(), seed002_knee())
    main, ttft, right = fig.axes
    assert main.get_title() == LATENCY_TITLE
    assert {"e2e_p50_ms", "e2e_p95_ms", "e2e_p99_ms"} <= _gids(main)
    assert _marks(main)["past"] == 32 and _marks(main)["red_line"] == 48
    assert {"ttft_p50_ms", "ttft_p95_ms"} <= _gids(ttft)
    assert right.get_ylabel().startswith("GPU memory")
    assert {"gpu_mem_peak_pct", "kv_cache_peak_pct"} <= _gids(right)
    p50 = next(line for line in main.get_lines() if line.get_gid() == "e2e_p50_ms")
    assert list(p50.get_ydata()) == pytest.approx([0.6, 0.9, 1.8, 4.5, 12.0])  # seconds
    assert list(p50.get_xdata()) == [4, 16, 24, 32, 48]  # step stages only, no baseline
    assert png_bytes(fig).startswith(PNG_MAGIC)


def test_latency_figure_without_telemetry_notes_it() -> None:
    summary = seed002_summary()
    summary["gpu_mem_peak_pct"] = math.nan
    summary["kv_cache_peak_pct"] = math.nan
    summary["ttft_p50_ms"] = math.nan
    summary["ttft_p95_ms"] = math.nan
    knee = seed002_knee()
    fig = latency_figure(summary, knee)
    _, ttft, right = fig.axes
    assert len(right.get_lines()) == 1  # only the memory-pressure guide is left
    guide = right.get_lines()[0]
    assert guide.get_linestyle() == ":"
    assert list(guide.get_ydata()) == [memory_pressure_pct(knee)] * 2
    assert not any(gid.startswith("ttft") for gid in _gids(ttft))
    notes = _notes(fig)
    assert "no-ttft" in notes
    (no_data,) = [n for n in notes if n.startswith("no-data:")]
    assert {"gpu_mem_peak_pct", "kv_cache_peak_pct"} <= set(no_data.split(":")[1].split(","))


def test_throughput_figure_ideal_line_from_first_stage() -> None:
    fig = throughput_figure(seed002_summary(), seed002_knee())
    (ax,) = fig.axes
    assert ax.get_title() == THROUGHPUT_TITLE
    lines = {line.get_gid(): line for line in ax.get_lines()}
    ideal = lines["ideal"]
    assert list(ideal.get_xdata()) == [4, 48]
    assert list(ideal.get_ydata()) == pytest.approx([220, 220 * 12])
    measured = lines["measured"]
    assert list(measured.get_xdata()) == [4, 16, 24, 32]  # 48 has no tok/s: left out, not 0
    assert _marks(ax)["past"] == 32  # the knee stage, the first past the capacity
    assert _marks(ax)["capacity"] == seed002_knee().max_concurrency
    assert ax.get_ylim()[1] < 220 * 12  # the ideal line does not flatten the measured one


def test_throughput_figure_with_nothing_measured() -> None:
    summary = seed002_summary()
    summary["output_tok_s"] = math.nan
    fig = throughput_figure(summary, None)
    assert _notes(fig) == {"no-throughput"}
    assert png_bytes(fig).startswith(PNG_MAGIC)


def test_timeline_has_four_panels_bands_and_all_series(run_frames, tmp_path: Path) -> None:
    fig = timeline_figure(
        stages=run_frames["stages"],
        requests=run_frames["requests"],
        gpu=run_frames["gpu"],
        server=run_frames["server"],
    )
    lat, gpu, kv, queue = fig.axes
    assert len(lat.collections) >= 2  # scatter per phase
    assert len(lat.patches) >= len(run_frames["stages"])  # shaded measured windows
    assert {"gpu_memory", "gpu_util"} <= _gids(gpu)
    assert "kv" in _gids(kv)
    assert {"running", "waiting"} <= _gids(queue)
    assert not _notes(fig) - {"sampled"}  # nothing noted missing
    stage_labels = [t.get_text() for t in lat.texts]
    assert stage_labels[:3] == ["base", "c=1", "c=2"]
    path = save_png(fig, tmp_path / "timeline.png")
    assert path.read_bytes().startswith(PNG_MAGIC) and path.stat().st_size > 10_000


def test_timeline_without_telemetry_notes_instead_of_crashing(run_frames) -> None:
    fig = timeline_figure(stages=run_frames["stages"], requests=run_frames["requests"])
    assert {"no-gpu", "no-server"} <= _notes(fig)
    assert png_bytes(fig).startswith(PNG_MAGIC)


def test_timeline_with_empty_everything() -> None:
    empty = pd.DataFrame(columns=["start_unix_s", "end_unix_s", "outcome", "phase", "e2e_ms"])
    fig = timeline_figure(stages=pd.DataFrame(), requests=empty)
    assert "no-requests" in _notes(fig)
    assert png_bytes(fig).startswith(PNG_MAGIC)


def test_intervals_are_drawn_as_error_bars_where_a_stage_has_one():
    from matplotlib.container import ErrorbarContainer

    from tests.support.knee_frames import sweep

    summary = sweep(
        [4, 8, 16], [400.0, 780.0, 860.0], [220.0, 260.0, 600.0],
        output_tok_s_low=[390.0, 700.0, math.nan], output_tok_s_high=[410.0, 860.0, math.nan],
        e2e_p95_low_ms=[200.0, 250.0, 500.0], e2e_p95_high_ms=[240.0, 270.0, 700.0],
    )  # fmt: skip
    fig = throughput_figure(summary)
    bars = [c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 1
    segments = bars[0].lines[2][0].get_segments()
    assert [tuple(s[:, 1]) for s in segments] == [(390.0, 410.0), (700.0, 860.0)]  # 16: none
    fig = latency_figure(summary)
    bars = [c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)]
    segments = bars[0].lines[2][0].get_segments()
    got = [float(v) for s in segments for v in s[:, 1]]
    assert got == pytest.approx([0.2, 0.24, 0.25, 0.27, 0.5, 0.7])


def _misplaced(fig) -> list[str]:
    """What a figure's fixed margins failed to hold: an axes' labels and ticks, a legend or a
    title outside the figure, or over another panel (a twin axes shares its panel)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    page = fig.bbox.padded(1)  # a pixel of antialiasing
    boxes = {f"axes {i} ({ax.get_title() or ax.get_ylabel()})": (ax, ax.get_tightbbox(renderer))
             for i, ax in enumerate(fig.axes)}  # fmt: skip
    texts = [*fig.legends, *(t for t in fig.texts if t.get_text())]
    found = []
    for name, (ax, box) in boxes.items():
        if not (page.contains(box.x0, box.y0) and page.contains(box.x1, box.y1)):
            found.append(f"{name} leaves the figure: {box} not in {fig.bbox}")
        for other_name, (other, other_box) in boxes.items():
            shared = other.get_position().bounds == ax.get_position().bounds
            if other is not ax and not shared and box.overlaps(other_box):
                found.append(f"{name} overlaps {other_name}")
        found += [
            f"{t} overlaps {name}" for t in texts if t.get_window_extent(renderer).overlaps(box)
        ]
    for text in texts:
        box = text.get_window_extent(renderer)
        if not (page.contains(box.x0, box.y0) and page.contains(box.x1, box.y1)):
            found.append(f"{text} leaves the figure")
    return found


def test_the_fixed_margins_hold_every_label_legend_and_title(run_frames, tmp_path) -> None:
    from analysis.cli import build_parser
    from analysis.pipeline import analyze_run
    from analysis.report.slo_plot import interactivity_figure
    from loadknee_core.slo_targets import SloParams

    ns = build_parser().parse_args(["run", "--slo", "tpot_p95_ms=20,ttft_p95_ms=500"])
    slo = SloParams.from_cli_args(ns, sla_ms=None, tail="p95")
    analysis = analyze_run(write_run_dir(tmp_path / "run"), slo_params=slo)
    assert analysis.slo is not None
    wide = seed002_summary().assign(output_tok_s=lambda f: f["output_tok_s"] * 1000)  # 6 digits
    figures = {
        "latency": latency_figure(seed002_summary(), seed002_knee()),
        "latency, its GPU memory a pre-allocated pool": latency_figure(
            seed002_summary(), dataclasses.replace(seed002_knee(), gpu_preallocated=True)
        ),
        "throughput": throughput_figure(wide, seed002_knee()),
        "timeline": timeline_figure(
            stages=run_frames["stages"],
            requests=run_frames["requests"],
            gpu=run_frames["gpu"],
            server=run_frames["server"],
        ),
        "interactivity": interactivity_figure(analysis.summary, None),
        "interactivity with its SLO line": interactivity_figure(analysis.summary, analysis.slo),
    }
    assert {name: _misplaced(fig) for name, fig in figures.items()} == {n: [] for n in figures}
