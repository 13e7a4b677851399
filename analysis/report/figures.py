"""The report's PNGs of one analysed run, drawn: file name → (title on the page, PNG bytes).

Its own module because it imports matplotlib, which takes about as long to import as pandas:
:func:`analysis.report.writer.write_report` loads it only when it draws, so that ``loadknee
analyze`` has printed the answer first, and the terminal's modules never load it.
"""

from __future__ import annotations

from analysis.pipeline import Analysis
from analysis.report.plots import latency_figure, png_bytes, throughput_figure, timeline_figure
from analysis.report.slo_plot import interactivity_figure


def draw_pngs(analysis: Analysis) -> dict[str, tuple[str, bytes]]:
    """latency.png, throughput.png, timeline.png and interactivity.png, in the page's order."""
    figures = {
        "latency.png": ("Latency vs concurrency", latency_figure(analysis.summary, analysis.knee)),
        "throughput.png": (
            "Throughput vs concurrency",
            throughput_figure(analysis.summary, analysis.knee),
        ),
        "timeline.png": (
            "Timeline",
            timeline_figure(
                stages=analysis.run.stages,
                requests=analysis.run.requests,
                gpu=analysis.run.gpu,
                server=analysis.server_timeline,
            ),
        ),
        "interactivity.png": (
            "Interactivity vs throughput",
            interactivity_figure(analysis.summary, analysis.slo),
        ),
    }
    return {name: (title, png_bytes(fig)) for name, (title, fig) in figures.items()}
