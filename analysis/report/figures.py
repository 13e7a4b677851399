"""The report's PNGs of one analysed run, drawn: file name → (title on the page, PNG bytes).

Its own module because it imports matplotlib, which takes about as long to import as pandas:
:func:`analysis.report.writer.write_report` loads it only when it draws, so that ``loadknee
analyze`` has printed the answer first, and the terminal's modules never load it.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from analysis.advice.deploy import memory_pressure_pct
from analysis.pipeline import Analysis
from analysis.report.plots import latency_figure, png_bytes, throughput_figure, timeline_figure
from analysis.report.slo_plot import interactivity_figure


def figures(analysis: Analysis) -> dict[str, tuple[str, Figure]]:
    """latency.png, throughput.png, timeline.png and interactivity.png, in the page's order, as
    figures; every threshold drawn is the one the knee was judged with."""
    return {
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
                memory_pressure_pct=memory_pressure_pct(analysis.knee),
            ),
        ),
        "interactivity.png": (
            "Interactivity vs throughput",
            interactivity_figure(analysis.summary, analysis.slo),
        ),
    }


def draw_pngs(analysis: Analysis) -> dict[str, tuple[str, bytes]]:
    """:func:`figures` drawn: file name → (title on the page, PNG bytes)."""
    return {name: (title, png_bytes(fig)) for name, (title, fig) in figures(analysis).items()}
