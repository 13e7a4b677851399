"""The pieces every part of report.html is built from: escaped text, a table, a tile, a list.

Each part of the page (:mod:`analysis.report.html` and the ``html_*`` modules it assembles, the
workload and what-if sections) writes its markup with these, so a table or a tile looks the same
wherever it stands and every text passes through :func:`esc` once.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from analysis.report.table import fmt_text
from loadknee_core.numeric import fmt_magnitude


def esc(value: Any) -> str:
    """Any value as text, safe inside an element and inside a quoted attribute."""
    return html.escape(str(value), quote=True)


def table(
    headers: Iterable[str],
    rows: Iterable[Iterable[str]],
    *,
    numeric: tuple[int, ...] = (),
    css: str = "",
) -> str:
    """An HTML table; cells are already-escaped HTML, ``numeric`` = right-aligned column indexes,
    ``css`` the table's class."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    opening = f'<table class="{css}">' if css else "<table>"
    return f"{opening}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def figure(value: Any) -> str:
    """A figure as HTML: a float to its significant digits, a pair as ``low–high``, else text."""
    if isinstance(value, float):
        return fmt_magnitude(value)
    if isinstance(value, list | tuple):
        return "–".join(figure(v) for v in value) if len(value) == 2 else esc(value)
    return esc(fmt_text(value))


def card(title: str, value: str, hint: str, *, attrs: str = "") -> str:
    """One figure in a tile: its title and small print escaped here, ``value`` already HTML,
    ``attrs`` the tile's extra attributes (with their leading space)."""
    return (
        f'<div class="card"{attrs}><span>{esc(title)}</span><b>{value}</b>'
        f"<span>{esc(hint)}</span></div>"
    )


def items(texts: Iterable[Any]) -> str:
    """Each text as an escaped ``<li>``, without the list around them."""
    return "".join(f"<li>{esc(t)}</li>" for t in texts)
