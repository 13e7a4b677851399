"""report.html's SLO section: the limits used (a preset never hides its numbers), the SLO
capacity beside the knee's and which binds, then per stage its goodput and what broke."""

from __future__ import annotations

from analysis.report.html_kit import card, esc, items, table
from analysis.report.slo_words import breaks_text, limits_text, summary_text
from analysis.slo.evaluate import SloResult
from loadknee_core.numeric import fmt_magnitude


def slo_html(slo: SloResult) -> str:
    """Both answers side by side, and per stage goodput and what broke."""
    tiles = "".join(
        card(title, "none" if value is None else esc(value), hint)
        for title, value, hint in (
            ("SLO capacity", slo.capacity, "highest users meeting every SLO"),
            ("max concurrency (knee)", slo.max_concurrency, "throughput-bound answer"),
            ("binding", f"{slo.binding}-bound", "the smaller of the two decides"),
        )
    )
    rows = [
        (
            str(s.target_users),
            "met" if s.met else '<span class="fired">broken</span>',
            fmt_magnitude(s.good_pct),
            fmt_magnitude(s.goodput_rps),
            fmt_magnitude(s.good_output_tok_s),
            esc("; ".join(breaks_text(s.breaks)) or "-"),
        )
        for s in slo.stages
    ]
    stages = table(
        ("users", "SLO", "good %", "good req/s", "good out tok/s", "broken by"),
        rows,
        numeric=(0, 2, 3, 4),
    )
    return (
        f"<p>Limits used: <b>{esc(limits_text(slo.params))}</b></p>"
        f"<ul>{items(f'preset {s}' for s in slo.sources)}</ul>"
        f'<div class="cards">{tiles}</div><p>{esc(summary_text(slo))}</p>{stages}'
    )
