"""The report's PNGs of one analysed run, drawn: file name → (title on the page, PNG bytes).

Its own module because it imports matplotlib, which takes about as long to import as pandas:
only :mod:`analysis.report.painter` loads it, in the child process that draws the PNGs after
``loadknee analyze`` has printed the answer (or in line, where it cannot fork), and the
terminal's modules never load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analysis.report.plots import latency_figure, png_bytes, throughput_figure, timeline_figure
from analysis.report.slo_plot import interactivity_figure

if TYPE_CHECKING:
    from analysis.report.painter import PlotInputs


def draw_pngs(inputs: PlotInputs) -> dict[str, tuple[str, bytes]]:
    """latency.png, throughput.png, timeline.png and interactivity.png, in the page's order."""
    figures = {
        "latency.png": ("Latency vs concurrency", latency_figure(inputs.summary, inputs.knee)),
        "throughput.png": (
            "Throughput vs concurrency",
            throughput_figure(inputs.summary, inputs.knee),
        ),
        "timeline.png": (
            "Timeline",
            timeline_figure(
                stages=inputs.stages,
                requests=inputs.requests,
                gpu=inputs.gpu,
                server=inputs.server,
            ),
        ),
        "interactivity.png": (
            "Interactivity vs throughput",
            interactivity_figure(inputs.summary, inputs.slo),
        ),
    }
    return {name: (title, png_bytes(fig)) for name, (title, fig) in figures.items()}
