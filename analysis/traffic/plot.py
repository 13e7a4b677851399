"""The traffic-shape figure: arrivals per second and requests in flight over the log's time."""

from __future__ import annotations

from matplotlib.figure import Figure

from analysis.report.plots import new_figure
from analysis.traffic.headroom import Headroom
from analysis.traffic.shape import TrafficShape


def traffic_figure(shape: TrafficShape, *, room: Headroom | None = None, title: str = "") -> Figure:
    """Two panels sharing the time axis (from the first start): the arrival rate per bin,
    and the in-flight count (mean and maximum per bin, its P95, and what the run allows)."""
    fig = new_figure(9.0, 5.5, rows=2)
    top, bottom = fig.subplots(2, 1, sharex=True)
    unit, per = (("s", 1.0) if shape.span_s < 300 else ("minutes", 60.0) if shape.span_s < 3 * 3600
                 else ("hours", 3600.0))  # fmt: skip
    x = [k * shape.bin_s / per for k in range(len(shape.arrivals))]
    top.step(x, [c / shape.bin_s for c in shape.arrivals], where="post", color="#1565c0", lw=1)
    top.set_ylabel("arrivals / s")
    top.set_title(title or "logged traffic", loc="left", fontsize=10)
    if shape.inflight_mean is not None and shape.inflight_max is not None:
        bottom.step(
            x, shape.inflight_max, where="post", color="#ef6c00", lw=0.8, label="max in bin"
        )
        bottom.step(
            x, shape.inflight_mean, where="post", color="#2e7d32", lw=1, label="mean in bin"
        )
        if shape.inflight is not None:
            bottom.axhline(shape.inflight.p95, color="#757575", ls=":", lw=1, label="P95 over time")
        if room is not None:
            label = f"allowed ({'≥ ' if room.lower_bound else ''}{room.allowed})"
            bottom.axhline(room.allowed, color="#c62828", ls="--", lw=1.2, label=label)
        bottom.legend(loc="upper right", fontsize=8)
    else:
        bottom.text(0.5, 0.5, "no durations: in flight unknown", ha="center",
                    transform=bottom.transAxes)  # fmt: skip
    bottom.set_ylabel("in flight")
    bottom.set_xlabel(f"{unit} from the first request (bins of {shape.bin_s:g} s)")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    return fig
