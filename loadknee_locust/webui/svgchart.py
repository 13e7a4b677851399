"""Draw a small line chart as an inline SVG string, in pure Python (no matplotlib, no script).

Why server-side SVG: the web UI must work with no internet access (no CDN chart library) and the
Locust process must not import matplotlib; a few hundred bytes of SVG per chart, built from
numbers the plugin already holds, cost microseconds. Axes and text use ``currentColor`` so the
chart follows Locust's light and dark themes; series colours are mid-tone and readable on both.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

WIDTH, HEIGHT = 420, 220
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 26, 34
PALETTE = ("#3b82f6", "#f59e0b", "#10b981", "#ef4444", "#a855f7")


@dataclass(frozen=True)
class Series:
    """One line: its name in the legend, its points (x, y; a None y leaves a gap), its style."""

    name: str
    points: tuple[tuple[float, float | None], ...]
    dashed: bool = False
    color: str = ""


@dataclass(frozen=True)
class Chart:
    """A titled chart of one or more series; ``hline`` marks a reference value (the baseline).

    ``key`` names the chart in the page (``data-chart``), so a script or a test can find it.
    """

    key: str
    title: str
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    hline: tuple[str, float] | None = None
    log2_x: bool = False  # users 1, 2, 4 … 64: equal steps read better


def _nice_max(value: float) -> float:
    if value <= 0 or not math.isfinite(value):
        return 1.0
    exp = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * exp:
            return step * exp
    return 10 * exp


def _fmt(value: float) -> str:
    """A short number for ticks and tooltips: 4 significant digits, thousands as ``k``."""
    if abs(value) >= 1000:
        return f"{value / 1000:.4g}k"
    return f"{value:.4g}"


def render(chart: Chart) -> str:
    """The chart as one ``<svg>`` element (an empty frame saying "waiting for data" when empty)."""
    xs = [x for s in chart.series for x, _ in s.points]
    ys = [y for s in chart.series for _, y in s.points if y is not None and math.isfinite(y)]
    if chart.hline is not None:
        ys.append(chart.hline[1])
    esc = html.escape
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="lk-chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{esc(chart.title)}" '
        f'data-chart="{esc(chart.key)}" '
        'style="color:inherit;font:11px sans-serif">',
        f'<text x="{LEFT}" y="14" fill="currentColor" font-weight="bold">{esc(chart.title)}</text>',
    ]
    x0, y0, x1, y1 = LEFT, HEIGHT - BOTTOM, WIDTH - RIGHT, TOP
    parts.append(
        f'<path d="M{x0} {y1}V{y0}H{x1}" fill="none" stroke="currentColor" stroke-opacity=".6"/>'
    )
    if not xs or not ys:
        parts.append(
            f'<text x="{(x0 + x1) / 2}" y="{(y0 + y1) / 2}" text-anchor="middle" '
            'fill="currentColor" opacity=".6">waiting for data</text></svg>'
        )
        return "".join(parts)

    def tx(v: float) -> float:
        return math.log2(max(v, 1e-9)) if chart.log2_x else v

    lo_x, hi_x = tx(min(xs)), tx(max(xs))
    if hi_x == lo_x:
        lo_x, hi_x = lo_x - 1, hi_x + 1
    top = _nice_max(max(ys))

    def px(v: float) -> float:
        return round(x0 + (tx(v) - lo_x) / (hi_x - lo_x) * (x1 - x0), 1)

    def py(v: float) -> float:
        return round(y0 - v / top * (y0 - y1), 1)

    for frac in (0.0, 0.5, 1.0):  # y grid
        v = top * frac
        parts.append(
            f'<line x1="{x0}" x2="{x1}" y1="{py(v)}" y2="{py(v)}" stroke="currentColor" '
            f'stroke-opacity=".15"/><text x="{x0 - 4}" y="{py(v) + 4}" text-anchor="end" '
            f'fill="currentColor">{_fmt(v)}</text>'
        )
    ticks = sorted(set(xs))
    if len(ticks) > 10:
        ticks = [ticks[0], ticks[len(ticks) // 2], ticks[-1]]
    for v in ticks:
        parts.append(
            f'<text x="{px(v)}" y="{y0 + 13}" text-anchor="middle" fill="currentColor">'
            f"{_fmt(round(v, 1))}</text>"
        )
    parts.append(
        f'<text x="{(x0 + x1) / 2}" y="{HEIGHT - 4}" text-anchor="middle" fill="currentColor" '
        f'opacity=".8">{esc(chart.x_label)}</text>'
        f'<text transform="translate(11 {(y0 + y1) / 2}) rotate(-90)" text-anchor="middle" '
        f'fill="currentColor" opacity=".8">{esc(chart.y_label)}</text>'
    )
    if chart.hline is not None:
        name, value = chart.hline
        parts.append(
            f'<line x1="{x0}" x2="{x1}" y1="{py(value)}" y2="{py(value)}" stroke="currentColor" '
            f'stroke-dasharray="2 3"/><text x="{x1}" y="{py(value) - 3}" text-anchor="end" '
            f'fill="currentColor" opacity=".8">{esc(name)}</text>'
        )
    legend_x = LEFT + 4
    for i, s in enumerate(chart.series):
        color = s.color or PALETTE[i % len(PALETTE)]
        dash = ' stroke-dasharray="5 4"' if s.dashed else ""
        for run in _runs(s.points):
            d = " ".join(f"{'M' if j == 0 else 'L'}{px(x)} {py(y)}" for j, (x, y) in enumerate(run))
            parts.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
            if len(s.points) <= 40:
                parts.extend(
                    f'<circle cx="{px(x)}" cy="{py(y)}" r="3" fill="{color}" '
                    f'data-series="{esc(s.name)}" data-x="{x:g}" data-y="{y:g}">'
                    f"<title>{esc(s.name)}: {_fmt(y)} {esc(chart.y_label)} at {_fmt(x)} "
                    f"{esc(chart.x_label)}</title></circle>"
                    for x, y in run
                )
        parts.append(
            f'<rect x="{legend_x}" y="{TOP - 2}" width="10" height="3" fill="{color}"/>'
            f'<text x="{legend_x + 13}" y="{TOP + 2}" fill="currentColor">{esc(s.name)}</text>'
        )
        legend_x += 20 + 6 * len(s.name)
    parts.append("</svg>")
    return "".join(parts)


def _runs(
    points: Sequence[tuple[float, float | None]],
) -> list[list[tuple[float, float]]]:
    """Consecutive points with a value (a None breaks the line)."""
    runs: list[list[tuple[float, float]]] = [[]]
    for x, y in points:
        if y is None or not math.isfinite(y):
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append((x, y))
    return [r for r in runs if r]
