"""The report's PNGs of one analysed run, drawn: file name → (title on the page, PNG bytes).

Its own module because it imports matplotlib, which takes about as long to import as pandas:
only :mod:`analysis.report.painter` loads it, in the child process that draws the PNGs after
``loadknee analyze`` has printed the answer (or in line, where it cannot fork), and the
terminal's modules never load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from matplotlib.figure import Figure

from analysis.advice.deploy import memory_pressure_pct
from analysis.report.plots import latency_figure, png_bytes, throughput_figure, timeline_figure
from analysis.report.slo_plot import interactivity_figure

if TYPE_CHECKING:
    from analysis.report.plot_inputs import PlotInputs


def figures(inputs: PlotInputs) -> dict[str, tuple[str, Figure]]:
    """latency.png, throughput.png, timeline.png and interactivity.png, in the page's order, as
    figures; every threshold drawn is the one the knee was judged with."""
    return {
        "latency.png": (
            "Latency vs concurrency",
            latency_figure(inputs.summary, inputs.knee, inputs.view),
        ),
        "throughput.png": (
            "Throughput vs concurrency",
            throughput_figure(inputs.summary, inputs.knee, inputs.view),
        ),
        "timeline.png": (
            "Timeline",
            timeline_figure(
                stages=inputs.stages,
                requests=inputs.requests,
                gpu=inputs.gpu,
                server=inputs.server,
                memory_pressure_pct=memory_pressure_pct(inputs.knee),
                gpu_preallocated=inputs.knee.gpu_preallocated,
            ),
        ),
        "interactivity.png": (
            "Interactivity vs throughput",
            interactivity_figure(inputs.summary, inputs.slo),
        ),
    }


def draw_pngs(inputs: PlotInputs) -> dict[str, tuple[str, bytes]]:
    """:func:`figures` drawn: file name → (title on the page, PNG bytes)."""
    return {name: (title, png_bytes(fig)) for name, (title, fig) in figures(inputs).items()}
