"""The record table : one row per stage, as terminal text, markdown and CSV.

``record_frame(summary, knee)`` joins the per-stage summary with the verdicts into one tidy frame
(raw numbers, units in the column names); the three writers below only format that frame:

* :func:`format_text` aligns a subset of columns that fits the terminal width: columns are
  dropped least-important first (see ``priority`` in :data:`RECORD_COLUMNS`) and the dropped
  ones are named under the table, so nothing is hidden silently;
* :func:`format_markdown` prints every column, then the reasons as a numbered list keyed from
  the table, paste-able into a design review;
* :func:`format_csv` writes the whole frame (every summary column, verdict, reasons) with the
  csv module, missing values empty.

Missing numbers are shown as "—" (not measured), never 0. Latencies are printed in seconds for e2e
(the unit of the method) and in milliseconds for TTFT and ITL; every header carries its unit.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from analysis.model import VERDICT_LABELS, KneeResult, StageVerdict
from analysis.report.diagnosis_words import bottleneck_text, failures_text
from analysis.report.rate_words import rate_records
from analysis.report.slo_words import breaks_text
from analysis.report.stage_reasons import reasons_text
from analysis.slo.evaluate import SloResult
from loadknee_core.numeric import NA, counted, fmt_int, fmt_magnitude, fmt_pct, is_missing

#: Columns the record frame adds to the summary columns.
VERDICT_COLUMNS: tuple[str, ...] = (
    "verdict",
    "trusted",
    "bottleneck",
    "bottleneck_reason",
    "failures",
    "reasons",
)


def fmt_excluded(value: Any) -> str:
    """A count of exceptions (rows excluded for their lengths, requests resent): "-" for none, so
    a count stands out."""
    text = fmt_int(value)
    return "-" if text == "0" else text


def fmt_text(value: Any) -> str:
    """Text cell: — when not measured, "none" when known to be empty (no bottleneck)."""
    if is_missing(value):
        return NA
    return str(value) or "none"


@dataclass(frozen=True)
class Column:
    """One column of the printed record table."""

    key: str  # column of the record frame
    header: str  # printed header, unit included
    fmt: Callable[[Any], str]
    priority: int  # 0 = always shown; higher numbers are dropped first when the width is short
    numeric: bool = True  # right-aligned


def _seconds(value: Any) -> str:
    return fmt_magnitude(value, 0.001)


#: The record table: the core columns (users, P50, P99, tok/s, memory, success, verdict; all
#: priority 0) plus the ones the method needs to explain a verdict.
RECORD_COLUMNS: tuple[Column, ...] = (
    Column("target_users", "users", fmt_int, 0),
    Column("requests", "reqs", fmt_int, 1),  # sample size: how much each row rests on
    Column("window_s", "secs", fmt_magnitude, 1),
    Column("qps", "QPS", fmt_magnitude, 3),
    Column("e2e_p50_ms", "P50 s", _seconds, 0),
    Column("e2e_p95_ms", "P95 s", _seconds, 2),
    Column("e2e_p99_ms", "P99 s", _seconds, 0),
    Column("ttft_p50_ms", "TTFT50 ms", fmt_magnitude, 2),
    Column("ttft_p95_ms", "TTFT95 ms", fmt_magnitude, 5),
    Column("itl_p50_ms", "ITL50 ms", fmt_magnitude, 3),
    Column("output_tok_s", "out tok/s", fmt_magnitude, 0),
    Column("output_tok_s_hw_pct", "tok/s ±%", fmt_pct, 4),
    Column("s_per_1k_total_tokens", "s/1k tok", fmt_magnitude, 4),
    Column("gpu_mem_peak_pct", "mem %", fmt_pct, 0),
    Column("kv_cache_peak_pct", "KV %", fmt_pct, 1),
    Column("waiting_max", "wait max", fmt_int, 5),
    Column("success_pct", "ok %", fmt_pct, 0),
    Column("length_mismatch", "excluded", fmt_excluded, 1),
    Column("resent", "resent", fmt_excluded, 6),  # requests sent again on a fresh connection
    Column("verdict", "verdict", fmt_text, 0, numeric=False),
    Column("bottleneck", "bottleneck", fmt_text, 3, numeric=False),
    Column("failures", "failures", fmt_text, 6, numeric=False),
)

#: Printed only when SLOs were given (``record_frame(..., slo=...)`` adds their columns).
SLO_RECORD_COLUMNS: tuple[Column, ...] = (
    Column("slo_met", "SLO", lambda v: fmt_text({True: "met", False: "broken"}.get(v, v)), 0,
           numeric=False),
    Column("good_pct", "good %", fmt_pct, 1),
    Column("goodput_rps", "good req/s", fmt_magnitude, 4),
)  # fmt: skip


#: Printed only when the server's prefix-cache counters (analysis.stages.prefix_cache) found a
#: hit: a server with caching off still counts its lookups, and a column of zeros would push a
#: measured column out of the terminal's width (record.csv / record.md keep it).
CACHE_RECORD_COLUMNS: tuple[Column, ...] = (
    Column("prefix_cache_hit_pct", "cache hit %", fmt_pct, 2),
)


#: Printed only for open-loop rate stages (analysis.stages.rate_stages), first after users.
RATE_RECORD_COLUMNS: tuple[Column, ...] = (
    Column("rate_rps", "rate/s", fmt_magnitude, 0),
    Column("served_rps", "served/s", fmt_magnitude, 0),
    Column("backlog_last", "backlog", fmt_magnitude, 1),
    Column("send_wait_p95_ms", "wait95 ms", fmt_magnitude, 2),
    Column("rate_verdict", "rate verdict", fmt_text, 0, numeric=False),
)


def record_columns(frame: pd.DataFrame) -> tuple[Column, ...]:
    """The printed columns: the record table, plus the SLO columns when the frame has them and
    the prefix-cache hit rate when the server's counters found any hit."""
    cache = "prefix_cache_hit_pct" in frame and bool((frame["prefix_cache_hit_pct"] > 0).any())
    rates = RATE_RECORD_COLUMNS if "rate_rps" in frame else ()
    return (
        RECORD_COLUMNS[:1]
        + rates
        + RECORD_COLUMNS[1:]
        + (CACHE_RECORD_COLUMNS if cache else ())
        + (SLO_RECORD_COLUMNS if "slo_met" in frame else ())
    )


UNTRUSTED_NOTE = "* client-bound stage: the load generator was the limit, numbers not trusted"
NOISY_NOTE = "? stage too noisy or short to judge: its interval is too wide (see its reasons)"


def _verdict_cells(verdict: StageVerdict | None, kind: Any) -> dict[str, Any]:
    if verdict is None:
        label = "baseline" if kind == "baseline" else None
        return dict.fromkeys(VERDICT_COLUMNS) | {"verdict": label}
    label = VERDICT_LABELS.get(verdict.verdict, verdict.verdict)
    return {
        "verdict": (label if verdict.trusted else label + "*") + ("?" if verdict.noisy else ""),
        "trusted": verdict.trusted,
        "bottleneck": verdict.bottleneck if verdict.bottleneck != "none" else "",
        "bottleneck_reason": bottleneck_text(verdict.bottleneck_reason),
        "failures": failures_text(verdict.failures),
        "reasons": "; ".join(reasons_text(verdict)),
    }


def record_frame(
    summary: pd.DataFrame,
    knee: KneeResult | None,
    slo: SloResult | None = None,
    rates: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The summary rows with the verdict, trust flag, bottleneck and reasons of each stage, and
    with ``slo`` given the SLO verdict, % good, goodput and what broke (``slo_met``,
    ``good_pct``, ``goodput_rps``, ``good_output_tok_s``, ``slo_breaks``).

    Rows are listed by users (the baseline first), not in run order: a refine stage at 12 users
    runs after the 16-user stage that revealed the knee, and reads between 8 and 16."""
    by_stage = {v.stage: v for v in knee.stages} if knee is not None else {}
    frame = summary.reset_index(drop=True).copy()
    if "kind" in frame and "target_users" in frame:
        order = frame.assign(_level=frame["kind"].ne("baseline"))
        order = order.sort_values(["_level", "target_users", "stage"], kind="stable")
        frame = frame.loc[order.index].reset_index(drop=True)
    kinds = frame["kind"] if "kind" in frame else pd.Series([None] * len(frame))
    cells = [
        _verdict_cells(by_stage.get(int(stage)), kind)
        for stage, kind in zip(frame["stage"], kinds, strict=True)
    ]
    for column in VERDICT_COLUMNS:
        frame[column] = pd.Series([c[column] for c in cells], dtype=object)
    if slo is not None:
        judged = {s.stage: s for s in slo.stages}
        found = [judged.get(int(stage)) for stage in frame["stage"]]
        frame["slo_met"] = pd.Series([None if s is None else s.met for s in found], dtype=object)
        for name in ("good_pct", "goodput_rps", "good_output_tok_s"):
            values = [None if s is None else getattr(s, name) for s in found]
            frame[name] = pd.Series(values, dtype="float64")
        frame["slo_breaks"] = pd.Series(
            [None if s is None else "; ".join(breaks_text(s.breaks)) for s in found], dtype=object
        )
    if rates is not None and len(rates):  # open-loop rate stages: their columns by stage
        frame = frame.merge(rate_records(rates), on="stage", how="left")
    return frame


def _cells(frame: pd.DataFrame, columns: Iterable[Column]) -> list[list[str]]:
    cols = list(columns)
    return [[col.fmt(row.get(col.key)) for col in cols] for row in frame.to_dict(orient="records")]


def _render(columns: list[Column], rows: list[list[str]], sep: str = "  ") -> list[str]:
    widths = [max([len(c.header)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]

    def line(cells: list[str]) -> str:
        parts = [
            cell.rjust(w) if col.numeric else cell.ljust(w)
            for cell, w, col in zip(cells, widths, columns, strict=True)
        ]
        return sep.join(parts).rstrip()

    rule = sep.join("-" * w for w in widths)
    return [line([c.header for c in columns]), rule, *(line(r) for r in rows)]


def fit_columns(
    frame: pd.DataFrame, width: int, columns: tuple[Column, ...] = RECORD_COLUMNS
) -> tuple[list[Column], list[Column]]:
    """Columns to print within ``width`` characters, and the ones dropped to get there.

    Drops the least important column (highest priority number, rightmost first) until the table
    fits; priority-0 columns are never dropped, so a very narrow width still gets the core set.
    The cells are formatted once (dropping a column changes no other cell), not once per try:
    the terminal's table drops about ten columns, and each try read the frame row by row again.
    """
    cells = _cells(frame, columns)
    kept = list(range(len(columns)))  # positions in ``columns``
    dropped: list[Column] = []
    while True:
        lines = _render([columns[i] for i in kept], [[row[i] for i in kept] for row in cells])
        if max(len(x) for x in lines) <= width:
            break
        candidates = [i for i in kept if columns[i].priority > 0]
        if not candidates:
            break
        worst = max(candidates, key=lambda i: (columns[i].priority, kept.index(i)))
        kept.remove(worst)
        dropped.append(columns[worst])
    return [columns[i] for i in kept], dropped


def has_untrusted(frame: pd.DataFrame) -> bool:
    return "trusted" in frame and any(v is False for v in frame["trusted"])


def format_text(frame: pd.DataFrame, *, width: int = 120) -> str:
    """An aligned plain-text table fitting ``width`` columns, with notes on what was left out."""
    columns = record_columns(frame)
    kept, dropped = fit_columns(frame, width, columns)
    lines = _render(kept, _cells(frame, kept))
    if has_untrusted(frame):
        lines.append(UNTRUSTED_NOTE)
    if "verdict" in frame and any(str(v).endswith("?") for v in frame["verdict"]):
        lines.append(NOISY_NOTE)
    if dropped:
        names = ", ".join(c.header for c in sorted(dropped, key=columns.index))
        lines.append(f"(not shown for width: {names}; see record.md / record.csv)")
    return "\n".join(lines)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def reason_notes(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    """Each row's key in the table's ``why`` column ("1", "2"…; "-" for a row without reasons)
    and the numbered list the keys point to: ``1. 12 users, knee: …``."""
    keys: list[str] = []
    notes: list[str] = []
    texts = frame["reasons"] if "reasons" in frame else pd.Series([None] * len(frame))
    for users, verdict, text in zip(frame["target_users"], frame.get("verdict", texts), texts,
                                    strict=True):  # fmt: skip
        if is_missing(text) or not str(text):
            keys.append("-")
            continue
        keys.append(str(len(notes) + 1))
        head = f"{counted(int(users), 'user')}, {fmt_text(verdict)}"
        notes.append(f"{len(notes) + 1}. {_md_escape(head)}: {_md_escape(str(text))}")
    return keys, notes


def format_markdown(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured markdown table with every record column, then each stage's reasons
    in a numbered list under it, keyed from the table's ``why`` column (a column of sentences
    made the table hundreds of characters wide)."""
    keys, notes = reason_notes(frame)
    keyed = frame.assign(why_key=keys)
    columns = [*record_columns(frame), Column("why_key", "why", fmt_text, 0, numeric=False)]
    if "slo_breaks" in frame:
        columns.append(Column("slo_breaks", "SLO broken by", fmt_text, 0, numeric=False))
    rows = _cells(keyed, columns)
    header = "| " + " | ".join(c.header for c in columns) + " |"
    align = "|" + "|".join("---:" if c.numeric else ":---" for c in columns) + "|"
    body = ["| " + " | ".join(_md_escape(cell) for cell in row) + " |" for row in rows]
    lines = [header, align, *body]
    if has_untrusted(frame):
        lines += ["", UNTRUSTED_NOTE]
    if notes:
        lines += ["", "Reasons (the table's why column):", "", *notes]
    return "\n".join(lines) + "\n"


def _csv_cell(value: Any) -> Any:
    if is_missing(value):
        return ""
    if isinstance(value, bool):
        return int(value)
    return value


def format_csv(frame: pd.DataFrame) -> str:
    """A frame as CSV text: raw numbers, units in the names, missing = empty (the report's
    record.csv and the comparison's long table, compare.csv: one writer, one CSV dialect)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(frame.columns)
    for row in frame.itertuples(index=False):
        writer.writerow([_csv_cell(v) for v in row])
    return out.getvalue()
