"""The interactivity-vs-throughput plot: per stage, tokens/s one user sees against total tok/s.

The Pareto view used to pick an operating point: moving right buys total throughput, moving down
costs each user speed. Each point is a step stage, labelled with its concurrency and its SLO
verdict (green met / red broken, black when no SLO was given); points that sit on one spot
(the levels past the knee) share one label, so no label overprints another. Interactivity is
``1000 / TPOT P50`` (tokens per second while a user's answer streams) when the run measured TPOT,
else the stage's output tok/s divided by its users. A TPOT SLO is drawn as the horizontal line
``1000 / limit`` tok/s per user; the limits used are printed under the title.
Returns a ``Figure`` like :mod:`analysis.report.plots` (no pyplot, no global state).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.report.plots import Margins, new_figure, note
from analysis.report.slo_words import limits_text
from analysis.slo.evaluate import SloResult
from analysis.stages.levels import level_rows
from loadknee_core.numeric import counted

MET, BROKEN, UNJUDGED = "#2e7d32", "#c62828", "#424242"


def interactivity(steps: pd.DataFrame) -> tuple[pd.Series, str]:
    """Per-stage tokens/s per user and the axis label saying how it was measured."""
    column = steps["tpot_p50_ms"] if "tpot_p50_ms" in steps else pd.Series(dtype=float)
    tpot = pd.to_numeric(column, errors="coerce")
    if tpot.notna().any():
        return 1000.0 / tpot.where(tpot > 0), "output tok/s per user (1000 / TPOT P50)"
    per_user = steps["output_tok_s"] / steps["target_users"].astype(float)
    return per_user, "output tok/s per user (stage output tok/s / users)"


def interactivity_figure(summary: pd.DataFrame, slo: SloResult | None = None) -> Figure:
    """Tokens/s per user against total output tok/s, one labelled point per judged stage (grid
    and refine levels; the baseline is the yardstick)."""
    fig = new_figure(9, 5.5, Margins(top=0.45 if slo is None else 0.65))  # the limits: 2nd line
    ax = fig.add_subplot()
    steps = level_rows(summary).sort_values("target_users")
    y, label = interactivity(steps)
    x = pd.to_numeric(steps["output_tok_s"], errors="coerce")
    ax.set_xlabel("total output tok/s (throughput)")
    ax.set_ylabel(label)
    ax.grid(True, alpha=0.3)
    title = "Interactivity vs throughput"
    ax.set_title(
        title + (f"\nSLO: {limits_text(slo.params)}" if slo is not None else ""), fontsize=10
    )
    shown = x.notna() & y.notna()
    if not shown.any():
        note(ax, "no stage with both throughput and per-user speed measured", gid="no-slo-points")
        return fig
    met = {s.stage: s.met for s in slo.stages} if slo is not None else {}
    top = float(np.nanmax(y[shown].to_numpy()))
    ax.set_ylim(0, top * 1.25 if top > 0 else 1.0)
    ax.set_xlim(0, float(np.nanmax(x[shown].to_numpy())) * 1.15 or 1.0)
    ax.plot(x[shown], y[shown], color="#9e9e9e", linewidth=1, zorder=1)
    points = []
    for stage, users, xi, yi in zip(steps["stage"], steps["target_users"], x, y, strict=True):
        if pd.isna(xi) or pd.isna(yi):
            continue
        verdict = met.get(int(stage))
        colour = UNJUDGED if verdict is None else (MET if verdict else BROKEN)
        ax.scatter([xi], [yi], color=colour, s=60, zorder=3)
        points.append((float(xi), float(yi), int(users), verdict))
    for group in _close_groups(points, ax.get_xlim()[1], ax.get_ylim()[1]):
        x0, y0 = group[0][0], group[0][1]
        ax.annotate(
            _group_label(group), (x0, y0), textcoords="offset points", xytext=(6, 6),
            fontsize=8, gid="stage_label",
        )  # fmt: skip
    if slo is not None:
        for check_key, limit in {
            c.key: c.limit for s in slo.stages for c in s.checks if c.key.startswith("tpot_")
        }.items():
            ax.axhline(
                1000.0 / limit,
                color=BROKEN,
                linestyle="--",
                linewidth=1.2,
                label=f"SLO {check_key} ≤ {limit:g} ms → ≥ {1000.0 / limit:.3g} tok/s per user",
            )
        ax.scatter([], [], color=MET, label="meets every SLO")
        ax.scatter([], [], color=BROKEN, label="breaks an SLO")
        ax.legend(loc="best", fontsize=8)
    return fig


#: points closer than this share of the axes (x, y) get one label: a label each overprinted
#: (8, 12 and 16 users past the knee sit on one spot of the curve)
CLOSE = (0.12, 0.06)


def _close_groups(
    points: list[tuple[float, float, int, bool | None]], x_top: float, y_top: float
) -> list[list[tuple[float, float, int, bool | None]]]:
    """The points in order of users, those within :data:`CLOSE` of a group's first joined."""
    groups: list[list[tuple[float, float, int, bool | None]]] = []
    for point in sorted(points, key=lambda p: p[2]):
        near = next(
            (
                g for g in groups
                if abs(point[0] - g[0][0]) <= CLOSE[0] * x_top
                and abs(point[1] - g[0][1]) <= CLOSE[1] * y_top
            ),
            None,
        )  # fmt: skip
        if near is None:
            groups.append([point])
        else:
            near.append(point)
    return groups


def _group_label(group: list[tuple[float, float, int, bool | None]]) -> str:
    """``1 user``, ``8, 12, 16 users``; each level with its SLO mark (✓ met, ✗ broken)."""

    def mark(verdict: bool | None) -> str:
        return "" if verdict is None else (" ✓" if verdict else " ✗")

    if len(group) == 1:
        _, _, users, verdict = group[0]
        return counted(users, "user") + mark(verdict)
    return ", ".join(f"{users}{mark(verdict)}" for _, _, users, verdict in group) + " users"
