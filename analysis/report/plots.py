"""PNG plots of a run: latency and throughput against concurrency, and a timeline with stage bands.

Every function builds and returns a ``matplotlib.figure.Figure`` drawn by the Agg canvas: no
pyplot, no global state, no ``matplotlib.use()``, no ``show()``; the caller saves it with
:func:`png_bytes` / :func:`save_png`. Inputs are the analysis objects (summary frame, knee) and
the run's raw frames; missing telemetry leaves its line out and writes a note on the axes instead
of failing.

* :func:`latency_figure` — e2e P50/P95/P99 and TTFT P50/P95 (seconds) against users, with GPU
  memory % and KV-cache % on a second axis, the answer marked (:func:`_mark_answer`);
* :func:`throughput_figure` — output tok/s against users with the ideal linear-scaling line from
  the first step stage (X_1 × c / c_1), points coloured by verdict, the answer marked: the
  capacity in its 90 % interval band, the deploy level and the first stage past the capacity;
* :func:`timeline_figure` — per-request e2e latency, GPU memory/utilisation, KV-cache %, and
  running/waiting requests over time, each stage's warm-up and measured window shaded.

The dotted line on the memory and KV-cache axes is the memory-pressure threshold the knee was
judged with (``--knee-memory-pct``, from the knee's ``params``), drawn only where one is known.
GPU memory the knee found flat across the stages (``KneeResult.gpu_preallocated``) is labelled
a pre-allocated pool and drawn faint: its height over that line is no pressure.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

from analysis.advice.deploy import memory_pressure_pct
from analysis.model import KneeResult
from analysis.report.answer_view import AnswerView, answer_view, mark_labels
from analysis.report.colours import VERDICT_COLOURS
from analysis.stages.levels import level_rows

PHASE_COLOURS = {
    "baseline": "#7b1fa2",
    "warmup": "#9e9e9e",
    "measure": "#1565c0",
    "cooldown": "#bdbdbd",
}
#: a timeline scatter with more points than this is sampled (errors are always kept)
MAX_SCATTER_POINTS = 40_000
DPI = 110


@dataclass(frozen=True)
class Margins:
    """The space around the axes, in inches, and ``gap`` between stacked panels.

    Fixed, not measured: matplotlib's constrained layout measures every text of a figure before
    drawing it, which took about a third of the time of writing the report's four PNGs. Each
    figure knows what surrounds its axes (a title, tick labels, a legend below), so it says how
    much room that needs.
    """

    left: float = 0.85
    right: float = 0.25
    top: float = 0.45
    bottom: float = 0.6
    gap: float = 0.3


def set_margins(fig: Figure, margins: Margins = Margins(), *, rows: int = 1) -> None:
    """Place the figure's axes grid ``margins`` from its edges, ``rows`` panels stacked."""
    width, height = fig.get_size_inches()
    inner = height - margins.top - margins.bottom
    panel = (inner - (rows - 1) * margins.gap) / rows
    fig.subplots_adjust(
        left=margins.left / width,
        right=1 - margins.right / width,
        top=1 - margins.top / height,
        bottom=margins.bottom / height,
        hspace=margins.gap / panel,  # a fraction of the mean panel height
    )


def new_figure(
    width_in: float, height_in: float, margins: Margins = Margins(), *, rows: int = 1
) -> Figure:
    """A figure on its own Agg canvas, its axes grid placed by :func:`set_margins`."""
    fig = Figure(figsize=(width_in, height_in), dpi=DPI)
    FigureCanvasAgg(fig)
    set_margins(fig, margins, rows=rows)
    return fig


def png_bytes(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def save_png(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.write_bytes(png_bytes(fig))
    return path


def note(ax: Axes, text: str, *, gid: str, y: float = 0.5) -> None:
    """A grey message inside the axes: what is missing and why the line is absent; ``gid``
    names what is missing (``no-ttft``, ``no-data:<columns>``), for whoever reads the figure
    without its words."""
    ax.text(
        0.5,
        y,
        text,
        gid=gid,
        transform=ax.transAxes,
        ha="center",
        va="center",
        fontsize=9,
        color="#616161",
        style="italic",
    )


def _steps(summary: pd.DataFrame) -> pd.DataFrame:
    return level_rows(summary).sort_values("target_users")


def _has(frame: pd.DataFrame, column: str) -> bool:
    return column in frame and bool(pd.to_numeric(frame[column], errors="coerce").notna().any())


def _users_axis(ax: Axes, users: Iterable[Any]) -> None:
    """Linear users axis with a tick at every tested level.

    Linear, not log, although the levels are geometric: the ideal-scaling line must stay straight
    so that a measured curve bending under it reads as lost scaling.
    """
    levels = sorted({int(u) for u in users})
    ax.set_xlim(0, (levels[-1] if levels else 1) * 1.04)
    ax.xaxis.set_major_locator(FixedLocator(levels))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(level) for level in levels])
    ax.set_xlabel("concurrent users")
    ax.grid(True, alpha=0.3)


#: the colours of the answer's marks: the capacity (and its interval band) and the deploy level
CAPACITY_COLOUR = "#1b5e20"
DEPLOY_COLOUR = "#283593"


def _mark_answer(ax: Axes, view: AnswerView | None, *, labels: bool = True) -> None:
    """The capacity as a solid line in its 90 % interval band, the deploy level dash-dotted
    (one line when they are the same), the first stage past the capacity dotted. Each artist's
    ``gid`` names the figure it marks (``capacity``, ``capacity_interval``, ``deploy``,
    ``past``, ``red_line``), so the figures can be read back from the plot."""
    if view is None:
        return
    words = mark_labels(view)

    def label(gid: str) -> str | None:
        return words[gid] if labels else None

    if view.interval is not None and view.low is not None and view.high is not None:
        low, high = view.low, max(view.high, view.low + 0.2)  # one user's band stays visible
        band = ax.axvspan(
            low, high, color=CAPACITY_COLOUR, alpha=0.12, lw=0, label=label("capacity_interval")
        )
        band.set_gid("capacity_interval")
    if view.capacity is not None:
        ax.axvline(
            view.capacity, color=CAPACITY_COLOUR, linewidth=1.6,
            label=label("capacity"), gid="capacity",
        )  # fmt: skip
    if view.deploy is not None and view.deploy != view.capacity:
        ax.axvline(
            view.deploy, color=DEPLOY_COLOUR, linestyle="-.", linewidth=1.4,
            label=label("deploy"), gid="deploy",
        )  # fmt: skip
    if view.past_users is not None and view.past is not None:
        colour = VERDICT_COLOURS["knee" if view.past == "knee" else "red_line"]
        ax.axvline(
            view.past_users, color=colour, linestyle=":", linewidth=1.2,
            label=label("past"), gid="past",
        )  # fmt: skip
    if view.red_line_users is not None and view.past != "red line":
        ax.axvline(
            view.red_line_users, color=VERDICT_COLOURS["red_line"], linestyle=":", linewidth=1.2,
            label=label("red_line"), gid="red_line",
        )  # fmt: skip


def _view(knee: KneeResult | None, view: AnswerView | None) -> AnswerView | None:
    """The answer to mark: ``view`` (with the deploy figure), else the knee's alone."""
    return view if view is not None or knee is None else answer_view(knee, None)


#: interval columns (analysis.stages.intervals) of the columns drawn with error bars
INTERVAL_BOUNDS = {
    "output_tok_s": ("output_tok_s_low", "output_tok_s_high"),
    "e2e_p95_ms": ("e2e_p95_low_ms", "e2e_p95_high_ms"),
    "e2e_p99_ms": ("e2e_p99_low_ms", "e2e_p99_high_ms"),
}


def _error_bars(
    ax: Axes, steps: pd.DataFrame, column: str, scale: float, colour: str, label: str = ""
) -> None:
    """95 % interval bars on ``column`` where the stage has one (none drawn where it has not)."""
    bounds = INTERVAL_BOUNDS.get(column)
    if bounds is None or not all(b in steps for b in bounds):
        return
    low, high = (_numeric(steps, b) for b in bounds)
    value = _numeric(steps, column)
    has = low.notna() & high.notna() & value.notna()
    if not has.any():
        return
    x = steps.loc[has, "target_users"].astype(float).to_numpy()
    y = value[has].to_numpy() * scale
    yerr = np.vstack(
        [
            np.clip(y - low[has].to_numpy() * scale, 0, None),
            np.clip(high[has].to_numpy() * scale - y, 0, None),
        ]
    )
    ax.errorbar(
        x, y, yerr=yerr, fmt="none", ecolor=colour, elinewidth=1.2, capsize=4, label=label or None
    )


#: the latency plot's lines: column, legend label, style. P95 and P99 often coincide (a stage
#: of few requests has the same request at both): P99 is dashed with hollow markers over a
#: solid P95, so both stay visible where they overlap
LATENCY_SERIES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("e2e_p50_ms", "e2e P50", {"marker": "o", "color": "#1565c0"}),
    ("e2e_p95_ms", "e2e P95", {"marker": "s", "color": "#f57c00", "markersize": 8}),
    ("e2e_p99_ms", "e2e P99", {"marker": "^", "color": "#2e7d32", "linestyle": "--",
                               "markerfacecolor": "none", "zorder": 3}),
    ("ttft_p50_ms", "TTFT P50", {"marker": "o", "color": "#6a1b9a"}),
    ("ttft_p95_ms", "TTFT P95", {"marker": "s", "color": "#ad1457", "linestyle": "--"}),
)  # fmt: skip
#: the two answer plots' titles (the page shows its own, analysis.report.figures)
LATENCY_TITLE = "Latency percentiles vs concurrency"
THROUGHPUT_TITLE = "Throughput vs concurrency"
#: GPU memory's label when the knee found it flat across the stages: a pool allocated at start
#: (vLLM's --gpu-memory-utilization), not pressure, whatever its height against the threshold
PREALLOCATED_LABEL = "GPU memory: pre-allocated pool (flat)"


def latency_figure(
    summary: pd.DataFrame, knee: KneeResult | None = None, view: AnswerView | None = None
) -> Figure:
    """e2e percentiles (s) against users with GPU memory % and KV-cache % on a second axis, and
    TTFT percentiles (ms) in a panel below (they are 10-100× smaller than e2e)."""
    # the twin axis's label on the right; the legend, three rows at most, below the x axis
    view = _view(knee, view)
    fig = new_figure(9, 6.8, Margins(right=0.85, top=0.4, bottom=1.25), rows=2)
    ax, ax_ttft = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1.4])
    steps = _steps(summary)
    users = steps["target_users"].astype(float)
    missing: list[tuple[str, str]] = []  # (column, label)
    for target, scale, series in (
        (ax, 0.001, LATENCY_SERIES[:3]),
        (ax_ttft, 1.0, LATENCY_SERIES[3:]),
    ):
        for column, label, style in series:
            if _has(steps, column):
                target.plot(users, steps[column] * scale, label=label, gid=column, **style)
                _error_bars(target, steps, column, scale, str(style["color"]))
            else:
                missing.append((column, label))
        target.set_ylim(bottom=0)
        _users_axis(target, steps["target_users"])
        _mark_answer(target, view, labels=target is ax)
    ax.set_xlabel("")
    ax.set_ylabel("e2e latency (s)")
    ax_ttft.set_ylabel("TTFT (ms)")
    if not any(_has(steps, c) for c in ("ttft_p50_ms", "ttft_p95_ms")):
        note(ax_ttft, "no TTFT (non-streaming requests)", gid="no-ttft")
    right = ax.twinx()
    right.set_ylabel("GPU memory / KV cache peak (%)")
    right.set_ylim(0, 105)
    pool = knee is not None and knee.gpu_preallocated
    for column, label, colour in (
        ("gpu_mem_peak_pct", PREALLOCATED_LABEL if pool else "GPU memory peak %", "#6d4c41"),
        ("kv_cache_peak_pct", "KV cache peak %", "#00838f"),
    ):
        if _has(steps, column):
            gid = "gpu_preallocated" if pool and column == "gpu_mem_peak_pct" else column
            style = {"linestyle": ":", "alpha": 0.6} if gid == "gpu_preallocated" else {}
            right.plot(
                users, steps[column], color=colour, marker="x", label=label, gid=gid,
                **({"linestyle": "--"} | style),
            )  # fmt: skip
        else:
            missing.append((column, label))
    _pressure_line(right, None if knee is None else memory_pressure_pct(knee), label=True)
    if missing:
        note(
            ax,
            "no data: " + ", ".join(label for _, label in missing),
            gid="no-data:" + ",".join(column for column, _ in missing),
            y=0.95,
        )
    handles, labels = [], []
    for source in (ax, right, ax_ttft):
        h, lab = source.get_legend_handles_labels()
        pairs = [(x, y) for x, y in zip(h, lab, strict=True) if y not in labels]
        handles += [x for x, _ in pairs]
        labels += [y for _, y in pairs]
    if handles:
        fig.legend(handles, labels, loc="lower center", ncols=4, fontsize=8)
    ax.set_title(LATENCY_TITLE)
    return fig


def throughput_figure(
    summary: pd.DataFrame, knee: KneeResult | None = None, view: AnswerView | None = None
) -> Figure:
    """Output tok/s against users, the ideal linear-scaling line, points coloured by verdict."""
    view = _view(knee, view)
    fig = new_figure(9, 5)
    ax = fig.add_subplot()
    steps = _steps(summary)
    if "output_tok_s" not in steps:
        steps = steps.assign(output_tok_s=np.nan)
    measured = steps[_numeric(steps, "output_tok_s").notna()]
    ax.set_ylabel("output tokens / s")
    _users_axis(ax, steps["target_users"])
    if measured.empty:
        note(
            ax,
            "no throughput measured (no successful requests with token counts)",
            gid="no-throughput",
        )
        ax.set_title(THROUGHPUT_TITLE)
        return fig
    users = measured["target_users"].astype(float).to_numpy()
    tok_s = measured["output_tok_s"].astype(float).to_numpy()
    ax.plot(users, tok_s, color="#1565c0", marker="o", label="measured", gid="measured")
    _error_bars(ax, measured, "output_tok_s", 1.0, "#1565c0", label="95 % interval")
    verdicts = {v.stage: v.verdict for v in knee.stages} if knee is not None else {}
    for stage, x, y in zip(measured["stage"], users, tok_s, strict=True):
        colour = VERDICT_COLOURS.get(verdicts.get(int(stage), ""), "#1565c0")
        ax.scatter([x], [y], color=colour, s=60, zorder=3)
    for x, y in zip(users, tok_s, strict=True):
        ax.annotate(
            f"{y:.3g}", (x, y), textcoords="offset points", xytext=(0, 8), ha="center", fontsize=8
        )
    top = float(steps["target_users"].max())
    ideal_users = np.array([users[0], max(top, users[0])])
    ideal = tok_s[0] * ideal_users / users[0]
    ax.plot(
        ideal_users,
        ideal,
        color="#9e9e9e",
        linestyle="--",
        label=f"ideal linear scaling from {users[0]:.0f} user(s)",
        gid="ideal",
    )
    ax.set_ylim(0, max(float(np.nanmax(tok_s)) * 1.35, 1e-9))
    _mark_answer(ax, view)
    for verdict, colour in VERDICT_COLOURS.items():
        if verdict in verdicts.values():
            ax.scatter([], [], color=colour, label=verdict.replace("_", " "))
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(THROUGHPUT_TITLE)
    return fig


# --------------------------------------------------------------------------- timeline


def _numeric(frame: pd.DataFrame, column: str) -> pd.Series:
    return pd.to_numeric(frame[column], errors="coerce")


def _shade_stages(axes: list[Axes], stages: pd.DataFrame, t0: float) -> None:
    for i, row in enumerate(stages.sort_values("start_unix_s").to_dict(orient="records")):
        start, warm, end = (
            row.get(k) for k in ("start_unix_s", "warmup_end_unix_s", "measure_end_unix_s")
        )
        if pd.isna(start) or pd.isna(end):
            continue
        warm = start if pd.isna(warm) else warm
        colour = "#e3f2fd" if i % 2 == 0 else "#fff3e0"
        for ax in axes:
            if warm > start:
                ax.axvspan(start - t0, warm - t0, color="#eeeeee", hatch="//", alpha=0.6, lw=0)
            ax.axvspan(warm - t0, end - t0, color=colour, alpha=0.7, lw=0)
        label = "base" if row.get("kind") == "baseline" else f"c={int(row['target_users'])}"
        axes[0].text(
            (start + end) / 2 - t0,
            1.01,
            label,
            transform=axes[0].get_xaxis_transform(),
            ha="center",
            va="bottom",
            fontsize=8,
        )


def _latency_panel(ax: Axes, requests: pd.DataFrame, t0: float) -> None:
    ax.set_ylabel("request e2e (s)")
    if requests.empty or not _has(requests, "end_unix_s"):
        note(ax, "no requests recorded", gid="no-requests")
        return
    rows = requests
    if len(rows) > MAX_SCATTER_POINTS:
        failed = rows[rows["outcome"] != "ok"]
        rows = pd.concat(
            [rows[rows["outcome"] == "ok"].sample(MAX_SCATTER_POINTS, random_state=0), failed]
        )
        note(
            ax, f"{MAX_SCATTER_POINTS} of {len(requests)} ok requests shown", gid="sampled", y=0.92
        )
    ok = rows["outcome"] == "ok"
    x = _numeric(rows, "end_unix_s") - t0
    y = _numeric(rows, "e2e_ms") / 1000.0
    for phase, colour in PHASE_COLOURS.items():
        mask = ok & (rows["phase"] == phase)
        if mask.any():
            ax.scatter(x[mask], y[mask], s=6, color=colour, label=phase, alpha=0.6, lw=0)
    if (~ok).any():
        ax.scatter(
            x[~ok],
            y[~ok].fillna(0.0),
            s=18,
            color="#c62828",
            marker="x",
            label="failed / mismatched",
        )
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", fontsize=7, markerscale=2, ncols=5)


def _pressure_line(ax: Axes, pct: float | None, *, label: bool = False) -> None:
    """The memory-pressure threshold as a dotted line (none when no threshold is known), named
    in the legend when ``label``; its ``gid`` is ``memory_pressure``."""
    if pct is not None:
        ax.axhline(
            pct, color="#9e9e9e", linewidth=0.8, linestyle=":", gid="memory_pressure",
            label=f"memory pressure ({pct:g} %)" if label else None,
        )  # fmt: skip


def _gpu_panel(
    ax: Axes, gpu: pd.DataFrame | None, t0: float, pressure: float | None, pool: bool = False
) -> None:
    ax.set_ylabel("GPU (%)")
    ax.set_ylim(0, 105)
    if gpu is None or gpu.empty or not (_has(gpu, "memory_used_mib") or _has(gpu, "gpu_util_pct")):
        note(ax, "no GPU telemetry (gpu.csv absent or empty)", gid="no-gpu")
        return
    for index, one in gpu.groupby("gpu_index", dropna=False):
        one = one.sort_values("timestamp_unix_s")
        x = _numeric(one, "timestamp_unix_s") - t0
        suffix = f" gpu{str(index).removesuffix('.0')}" if gpu["gpu_index"].nunique() > 1 else ""
        if _has(one, "memory_used_mib") and _has(one, "memory_total_mib"):
            mem = 100.0 * _numeric(one, "memory_used_mib") / _numeric(one, "memory_total_mib")
            name = "memory % (pre-allocated pool)" if pool else "memory %"
            ax.plot(x, mem, color="#6d4c41", lw=1.2, label=name + suffix, gid="gpu_memory")
        if _has(one, "gpu_util_pct"):
            ax.plot(
                x,
                _numeric(one, "gpu_util_pct"),
                color="#2e7d32",
                lw=0.9,
                label="utilisation %" + suffix,
                gid="gpu_util",
            )
        if _has(one, "sm_util_pct"):
            ax.plot(
                x,
                _numeric(one, "sm_util_pct"),
                color="#9e9d24",
                lw=0.8,
                linestyle=":",
                label="SM active %" + suffix,
            )
    _pressure_line(ax, pressure)
    ax.legend(loc="upper left", fontsize=7, ncols=3)


def _server_panels(
    ax_kv: Axes, ax_queue: Axes, server: pd.DataFrame | None, t0: float, pressure: float | None
) -> None:
    ax_kv.set_ylabel("KV cache (%)")
    ax_kv.set_ylim(0, 105)
    ax_queue.set_ylabel("requests")
    if server is None or server.empty:
        note(ax_kv, "no server metrics (server_metrics.csv absent or empty)", gid="no-server")
        note(ax_queue, "no server metrics: running / waiting unknown", gid="no-server")
        return
    by_time = server.groupby("timestamp_unix_s").agg(
        kv=("kv_cache_usage_pct", "max"),
        running=("requests_running", "sum"),
        waiting=("requests_waiting", "sum"),
    )
    by_time = by_time.sort_index()
    x = by_time.index.to_numpy(dtype=float) - t0
    if by_time["kv"].notna().any():
        ax_kv.plot(x, by_time["kv"], color="#00838f", lw=1.2, label="KV cache usage %", gid="kv")
        _pressure_line(ax_kv, pressure)
        ax_kv.legend(loc="upper left", fontsize=7)
    else:
        note(ax_kv, "the server exports no KV-cache gauge", gid="no-kv-gauge")
    drawn = False
    for column, colour in (("running", "#1565c0"), ("waiting", "#c62828")):
        values = by_time[column]
        if server[f"requests_{column}"].notna().any():
            ax_queue.plot(x, values, color=colour, lw=1.2, label=column, gid=column)
            drawn = True
    if drawn:
        ax_queue.set_ylim(bottom=0)
        ax_queue.legend(loc="upper left", fontsize=7, ncols=2)
    else:
        note(ax_queue, "the server exports no running / waiting gauges", gid="no-queue-gauges")


def timeline_figure(
    *,
    stages: pd.DataFrame,
    requests: pd.DataFrame,
    gpu: pd.DataFrame | None = None,
    server: pd.DataFrame | None = None,
    memory_pressure_pct: float | None = None,
    gpu_preallocated: bool = False,
) -> Figure:
    """The run over time: latency, GPU, KV cache, queue; stage windows shaded (warm-up hatched);
    ``memory_pressure_pct`` (the knee's threshold) marked on the GPU and KV-cache panels;
    ``gpu_preallocated`` (the knee's finding) names the GPU memory line a pre-allocated pool.

    ``server`` is the canonical server timeline
    (``analysis.inputs.server_metrics.canonical_timeline``): ``timestamp_unix_s``,
    ``kv_cache_usage_pct``, ``requests_running``, ``requests_waiting``.
    """
    fig = new_figure(12, 10, Margins(right=0.2, top=0.55), rows=4)  # title, then stage names
    axes = list(fig.subplots(4, 1, sharex=True, height_ratios=[3, 2, 2, 2]))
    starts = [_numeric(stages, "start_unix_s").min()] if not stages.empty else []
    if not requests.empty and "start_unix_s" in requests:
        starts.append(_numeric(requests, "start_unix_s").min())
    valid = [s for s in starts if pd.notna(s)]
    t0 = float(min(valid)) if valid else 0.0
    if not stages.empty:
        _shade_stages(axes, stages, t0)
    _latency_panel(axes[0], requests, t0)
    _gpu_panel(axes[1], gpu, t0, memory_pressure_pct, gpu_preallocated)
    _server_panels(axes[2], axes[3], server, t0, memory_pressure_pct)
    for ax in axes:
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel("seconds since run start (shaded: measured window; hatched: warm-up)")
    fig.suptitle("Run timeline")
    return fig
