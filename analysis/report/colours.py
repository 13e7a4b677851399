"""The verdict colours, shared by the plots and the HTML page.

Their own module so that the page (and the terminal answer that imports the page's helpers) does
not import matplotlib, which :mod:`analysis.report.plots` needs and which takes about as long to
import as pandas.
"""

from __future__ import annotations

#: verdict → colour
VERDICT_COLOURS: dict[str, str] = {
    "comfortable": "#2e7d32",
    "critical": "#f9a825",
    "knee": "#ef6c00",
    "red_line": "#c62828",
    "insufficient_data": "#757575",
}
