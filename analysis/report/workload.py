"""What the load was made of, for ``knee.json`` and ``report.html``: the prefix cache,
conversations and traffic classes (``record.md`` has the same figures as lines of text).

:func:`workload_sections` gives a JSON-ready dict with a key for each part that applies to the
run (none for a plain single-class run without a cache or a shared prefix):

* ``prefix_cache``: where the hit rate comes from; per stage the counters' increase over the
  measured window (queries, hits, hit %: :mod:`analysis.stages.prefix_cache`); per stage the TTFT
  P50 of hits and misses (from the responses' ``cached_tokens``);
* ``conversations``: conversations seen, completed and cut; latency by turn index
  (:mod:`analysis.stages.conversations`);
* ``classes``: the binding class, and per class its weight, lengths, SLOs, SLO capacity, first
  broken level and one row per stage (share of the stage's requests, the class's own served
  requests, throughput and tails, and its SLO verdict and goodput: :mod:`analysis.slo.classes`).

:func:`workload_html` renders the same dict as the report's section. Numbers are the analysis
objects' own (no recomputation here); missing ones are ``None`` in JSON and — on the page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from analysis.report.html_kit import esc, table
from analysis.report.knee_json import jsonable
from analysis.report.slo_words import breaks_text, classes_text, limits_text
from analysis.report.table import fmt_magnitude
from analysis.report.workload_words import report_note
from analysis.slo.classes import ClassResult, analyze_classes
from analysis.stages.conversations import by_turn, conversation_counts, planned_turns
from analysis.stages.prefix_cache import PREFIX_CACHE_COLUMNS, hit_miss_ttft

if TYPE_CHECKING:
    from analysis.pipeline import Analysis

#: the per-stage figures of each class kept in knee.json and on the page
CLASS_STAGE_COLUMNS = ("ok", "output_tok_s", "ttft_p95_ms", "e2e_p95_ms")


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [jsonable(row) for row in frame.to_dict(orient="records")]


def _prefix_cache(analysis: Analysis) -> dict[str, Any] | None:
    note = report_note(analysis.run.server_metrics, analysis.run.run_info)
    hits = hit_miss_ttft(analysis.run.requests)
    if note is None and hits.empty:
        return None
    users = dict(zip(analysis.summary["stage"], analysis.summary["target_users"], strict=True))
    columns = ["stage", "target_users", *PREFIX_CACHE_COLUMNS]
    stages = analysis.summary[[c for c in columns if c in analysis.summary]]
    hits = hits.assign(target_users=hits["stage"].map(users))
    return {"source": note, "stages": _records(stages), "hit_miss_ttft": _records(hits)}


def _conversations(analysis: Analysis) -> dict[str, Any] | None:
    table = by_turn(analysis.run.requests)
    if table.empty:
        return None
    turns = planned_turns(analysis.run.run_info)
    counts = conversation_counts(analysis.run.requests, turns)
    return {"turns": turns, **counts, "by_turn": _records(table)}


def _class_stages(result: ClassResult) -> list[dict[str, Any]]:
    slo = {s.stage: s for s in result.slo.stages} if result.slo is not None else {}
    rows = []
    for row in result.summary.to_dict(orient="records"):
        stage = int(row["stage"])
        verdict = slo.get(stage)
        rows.append(
            jsonable(
                {
                    "stage": stage,
                    "target_users": row.get("target_users"),
                    "share_pct": result.shares.get(stage),
                    **{c: row.get(c) for c in CLASS_STAGE_COLUMNS},
                    "slo_met": None if verdict is None else verdict.met,
                    "slo_breaks": [] if verdict is None else breaks_text(verdict.breaks),
                    "good_pct": None if verdict is None else verdict.good_pct,
                    "goodput_rps": None if verdict is None else verdict.goodput_rps,
                }
            )
        )
    return rows


def _classes(analysis: Analysis) -> dict[str, Any] | None:
    result = analyze_classes(analysis.run, analysis.knee)
    if result is None:
        return None
    classes = [
        {
            **r.spec.as_dict(),
            "slo_limits": None if r.slo is None else limits_text(r.slo.params),
            "slo_capacity": r.capacity,
            "first_broken_users": r.first_broken,
            "stages": _class_stages(r),
        }
        for r in result.classes
    ]
    return {"binding": result.binding, "text": classes_text(result), "classes": classes}


def workload_sections(analysis: Analysis) -> dict[str, Any]:
    """The ``prefix_cache``, ``conversations`` and ``classes`` sections that apply to the run."""
    sections = {
        "prefix_cache": _prefix_cache(analysis),
        "conversations": _conversations(analysis),
        "classes": _classes(analysis),
    }
    return {key: value for key, value in sections.items() if value is not None}


# --- the page -------------------------------------------------------------------------------


def _num(value: Any) -> str:
    """A cell: — for a missing number, whole numbers (users, counts) without decimals."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return esc(value)
    return str(int(value)) if float(value).is_integer() else fmt_magnitude(value)


def _rows_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_num(v) if not isinstance(v, str) else esc(v) for v in row] for row in rows]
    return table(headers, cells, numeric=tuple(range(len(headers))))


def _cache_html(section: Mapping[str, Any]) -> str:
    parts = ["<h3>Prefix cache</h3>"]
    if section.get("source"):
        parts.append(f"<p>{esc(section['source'])}</p>")
    stages = [
        (
            r.get("target_users"),
            r.get("prefix_cache_queries"),
            r.get("prefix_cache_hits"),
            r.get("prefix_cache_hit_pct"),
        )
        for r in section.get("stages", ())
        if r.get("prefix_cache_queries") is not None
    ]
    if stages:
        parts.append(
            "<p>Hit rate per stage: the server's counters' increase over the measured window.</p>"
            + _rows_table(("users", "queries (tokens)", "hits (tokens)", "hit %"), stages)
        )
    hits = [
        (
            r.get("target_users"),
            r.get("hits"),
            r.get("hit_ttft_p50_ms"),
            r.get("misses"),
            r.get("miss_ttft_p50_ms"),
        )
        for r in section.get("hit_miss_ttft", ())
    ]
    if hits:
        parts.append(
            "<p>TTFT of prefix-cache hits vs misses (the server's <code>cached_tokens</code>; "
            "served, measured rows).</p>"
            + _rows_table(("users", "hits", "hit TTFT P50 ms", "misses", "miss TTFT P50 ms"), hits)
        )
    return "".join(parts)


def _turns_html(section: Mapping[str, Any]) -> str:
    head = (
        f"{section.get('conversations')} conversations, {section.get('completed')} with every "
        f"turn answered, {section.get('cut')} cut by a failure, a stage change or the run's end"
        if section.get("turns")
        else f"{section.get('conversations')} conversations (replayed, each with its own turns)"
    )
    rows = [
        (
            r["turn"],
            r["requests"],
            r["prompt_tokens_mean"],
            r["ttft_p50_ms"],
            r["ttft_p95_ms"],
            r["e2e_p50_ms"],
            r["e2e_p95_ms"],
        )
        for r in section.get("by_turn", ())
    ]
    headers = ("turn", "requests", "prompt tokens", "TTFT P50 ms", "TTFT P95 ms", "e2e P50 ms",
               "e2e P95 ms")  # fmt: skip
    return f"<h3>Conversations</h3><p>{esc(head)}; by turn:</p>" + _rows_table(headers, rows)


def _classes_html(section: Mapping[str, Any]) -> str:
    binding = section.get("binding")
    parts = ["<h3>Traffic classes</h3>"]
    parts += [f"<p>{esc(line)}</p>" for line in str(section.get("text", "")).splitlines()]
    headers = ("users", "share %", "served", "out tok/s", "TTFT P95 ms", "e2e P95 ms", "SLO",
               "good %", "goodput req/s", "broken by")  # fmt: skip
    for c in section.get("classes", ()):
        mark = " — binding" if c["name"] == binding else ""
        limits = c.get("slo_limits") or "no SLO"
        cap = c.get("slo_capacity")
        parts.append(
            f"<h4>{esc(c['name'])}{esc(mark)}: weight {esc(c['weight'])}, "
            f"{esc(c['input_tokens'])} → {esc(c['output_tokens'])} tokens; {esc(limits)}; "
            f"SLO capacity {esc('none' if cap is None else cap)}</h4>"
        )
        rows = [
            (r.get("target_users"), r.get("share_pct"), r.get("ok"), r.get("output_tok_s"),
             r.get("ttft_p95_ms"), r.get("e2e_p95_ms"),
             "—" if r.get("slo_met") is None else ("met" if r["slo_met"] else "broken"),
             r.get("good_pct"), r.get("goodput_rps"), "; ".join(r.get("slo_breaks") or ()) or "-")
            for r in c.get("stages", ())
        ]  # fmt: skip
        parts.append(_rows_table(headers, rows))
    return "".join(parts)


def _cache_applies(section: Mapping[str, Any] | None) -> bool:
    """Whether the prefix cache has anything to show: a hit in some stage (by the server's
    counters or the responses' ``cached_tokens``). A cache that never hit is a table of zeros."""
    if not section:
        return False
    counted = (r.get("prefix_cache_hits") for r in section.get("stages", ()))
    seen = (r.get("hits") for r in section.get("hit_miss_ttft", ()))
    return any(isinstance(v, int | float) and v > 0 for v in (*counted, *seen))


def workload_html(sections: Mapping[str, Any]) -> str:
    """The body of the report's "Workload" section from :func:`workload_sections`: only the
    parts that apply (no prefix cache that never hit); "" when none does."""
    parts = []
    if _cache_applies(sections.get("prefix_cache")):
        parts.append(_cache_html(sections["prefix_cache"]))
    if "conversations" in sections:
        parts.append(_turns_html(sections["conversations"]))
    if "classes" in sections:
        parts.append(_classes_html(sections["classes"]))
    return "".join(parts)
