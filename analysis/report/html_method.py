"""report.html's yardsticks: the baseline every stage is held against, and the method's note
with the knee's thresholds."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from analysis.model import PERCENTILE_METHOD, Baseline
from analysis.report.html_kit import esc, table
from analysis.report.html_params import redact
from loadknee_core.numeric import fmt_magnitude


def baseline_html(baseline: Baseline | None) -> str:
    """The baseline's figures, each median beside its P95."""
    if baseline is None:
        return "<p>No baseline.</p>"
    b = baseline
    pairs = (
        ("e2e P50 / P95 (ms)", b.e2e_p50_ms, b.e2e_p95_ms),
        ("TTFT P50 / P95 (ms)", b.ttft_p50_ms, b.ttft_p95_ms),
        ("s per 1k total tokens P50 / P95", b.s_per_1k_total_p50, b.s_per_1k_total_p95),
        ("s per 1k completion tokens P50 / P95", b.s_per_1k_completion_p50,
         b.s_per_1k_completion_p95),
    )  # fmt: skip
    rows = [
        ("source", esc(b.source)),
        ("requests", esc(b.requests)),
        *((name, f"{fmt_magnitude(p50)} / {fmt_magnitude(p95)}") for name, p50, p95 in pairs),
        ("single-user output tok/s", fmt_magnitude(b.output_tok_s)),
    ]
    return table(("baseline", "value"), rows)


def method_html(knee_params: Mapping[str, Any]) -> str:
    """How the figures were measured, and the knee's thresholds folded."""
    thresholds = json.dumps(redact(knee_params), indent=2, default=str)
    return (
        f"<p>Percentiles: {esc(PERCENTILE_METHOD)}. Statistics use the measured window of each "
        "stage only (warm-up and cooldown excluded; requests whose token counts missed the "
        "target are counted and left out).</p>"
        "<details><summary>Knee thresholds</summary>"
        f"<pre>{esc(thresholds)}</pre></details>"
    )
