"""report.html's record table: a row of figures per stage, tinted by its verdict, and under each
the stage's reasons folded in a row of their own.

A column of sentences squeezed the table and made every row a screen tall; folded under the
figures, the table stays readable from 1280 to 1920 pixels. The legend under it says what its
less obvious columns mean.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from analysis.model import KneeResult, StageVerdict
from analysis.report.colours import VERDICT_COLOURS
from analysis.report.diagnosis_words import bottleneck_text
from analysis.report.html_kit import esc, items
from analysis.report.stage_reasons import reasons_text
from analysis.report.table import fmt_text, record_columns
from loadknee_core.numeric import counted, is_missing

ROW_TINTS = {
    "comfortable": "#e8f5e9",
    "critical": "#fff8e1",
    "knee": "#fff3e0",
    "red_line": "#ffebee",
    "insufficient_data": "#f5f5f5",
}
#: what the record table's less obvious columns mean, under the table
RECORD_LEGEND = (
    "reqs: measured requests; secs: measured seconds; excluded: requests left out because "
    "their token counts missed the target; resent: requests sent again on a fresh connection; "
    "— not measured; - none. Open a row's \u201cwhy\u201d for its reasons."
)


def _verdict_key(label: Any) -> str:
    text = "" if is_missing(label) else str(label).rstrip("*")
    return text.replace(" ", "_")


def _why_row(row: Mapping[Any, Any], verdict: StageVerdict | None, span: int) -> str:
    """The stage's reasons (and what broke its SLO), folded in a row under its figures."""
    reasons = [] if verdict is None else list(reasons_text(verdict))
    if verdict is not None and verdict.bottleneck != "none":
        reason = bottleneck_text(verdict.bottleneck_reason)
        why = f": {reason}" if reason else ""
        reasons.append(f"bottleneck {verdict.bottleneck}{why}")
    breaks = row.get("slo_breaks")
    if isinstance(breaks, str) and breaks:
        reasons.append("SLO broken by " + breaks)
    if not reasons:
        return ""
    users = counted(int(row["target_users"]), "user")
    return (
        f'<tr class="why" data-stage="{esc(row.get("stage"))}"><td colspan="{span}"><details>'
        f"<summary>why: {esc(fmt_text(row.get('verdict')))} at {esc(users)} "
        f"({counted(len(reasons), 'reason')})</summary><ul>{items(reasons)}</ul>"
        "</details></td></tr>"
    )


def record_table_html(record: pd.DataFrame, knee: KneeResult | None = None) -> str:
    """The record table, each stage's reasons folded in a row under its figures, and its legend."""
    verdicts = {v.stage: v for v in knee.stages} if knee is not None else {}
    columns = list(record_columns(record))
    head = "".join(f"<th>{esc(c.header)}</th>" for c in columns)
    rows = []
    for row in record.to_dict(orient="records"):
        verdict = _verdict_key(row.get("verdict"))
        tint = ROW_TINTS.get(verdict, "#ffffff")
        colour = VERDICT_COLOURS.get(verdict, "#424242")
        cells = []
        for col in columns:
            text = esc(col.fmt(row.get(col.key)))
            if col.key == "verdict":
                cells.append(f'<td class="verdict" style="color:{colour}">{text}</td>')
            else:
                cells.append(f'<td class="n">{text}</td>' if col.numeric else f"<td>{text}</td>")
        rows.append(f'<tr class="stage" style="background:{tint}">{"".join(cells)}</tr>')
        rows.append(_why_row(row, verdicts.get(int(row["stage"])), len(columns)))
    return (
        f'<table class="record"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
        f'<p class="legend">{esc(RECORD_LEGEND)}</p>'
    )
