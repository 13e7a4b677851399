"""report.html: one self-contained page (inline CSS, plots as base64 PNGs, no external link),
assembled from its parts.

It reads top-down, in the order a reviewer asks (:data:`SECTIONS`, each a ``<section id>``
linked from the table of contents at the top): the answer and its one line of why
(:mod:`~analysis.report.html_answer`), beside it a small what-if table
(:mod:`analysis.report.whatif_html`); the throughput and latency plots with the capacity marked;
the record table with each stage's reasons folded under its figures
(:mod:`~analysis.report.html_record`); the warnings; then the detail: the SLO answer
(:mod:`~analysis.report.html_slo`), the reasons and signals of every stage and the diagnosis
(:mod:`~analysis.report.html_stages`), the workload (only the parts that apply:
:mod:`analysis.report.workload`), the recommendations (:mod:`~analysis.report.html_advice`), the
cluster files, the baseline, the other plots, the method (:mod:`~analysis.report.html_method`)
and the run's parameters folded, secrets withheld (:mod:`~analysis.report.html_params`).

Every text is escaped with :func:`~analysis.report.html_kit.esc`. Hand-written with the stdlib
rather than a template engine: the page is one function deep and jinja2 is not a declared
dependency.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analysis.advice.facts import Recommendations
from analysis.model import Baseline, KneeResult
from analysis.report.answer_view import answer_view, mark_labels
from analysis.report.html_advice import advice_html
from analysis.report.html_answer import answer_html
from analysis.report.html_kit import esc, items
from analysis.report.html_method import baseline_html, method_html
from analysis.report.html_params import params_html
from analysis.report.html_record import record_table_html
from analysis.report.html_slo import slo_html
from analysis.report.html_stages import stages_html
from analysis.slo.evaluate import SloResult

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;
 max-width:1880px;padding:0 16px;color:#212121}
h1{font-size:22px;margin-bottom:4px}h2{font-size:18px;border-bottom:1px solid #ddd;
 padding-bottom:4px;margin-top:28px}
.sub{color:#616161}.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{border:1px solid #ddd;border-radius:8px;padding:10px 14px;min-width:150px}
.card b{display:block;font-size:22px}.card span{color:#616161;font-size:12px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{border:1px solid #e0e0e0;padding:4px 8px;vertical-align:top}
th{background:#f5f5f5;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f6f8fa;border:1px solid #e0e0e0;padding:10px;overflow-x:auto;font-size:12px}
.verdict{font-weight:600}.warn{background:#fff8e1;border-left:4px solid #f9a825;padding:6px 10px;
 margin:6px 0}
img{max-width:100%;border:1px solid #eee;margin:8px 0}
.fired{color:#c62828;font-weight:600}.quiet{color:#9e9e9e}
table.record{width:100%;font-size:12px}table.record th,table.record td{padding:3px 5px}
table.record td.n,table.record td.verdict{white-space:nowrap}
table.record tr.why td{border-top:none;padding:0 8px 4px 24px}
table.record tr.why summary{cursor:pointer;color:#616161;font-size:12px}
table.record tr.why ul{margin:4px 0 6px;padding-left:18px}
nav#toc ol{columns:3;margin:8px 0;padding-left:22px}p.why{margin:4px 0}
p.legend{color:#616161;font-size:12px}figure{margin:8px 0}figcaption{color:#616161}
section#plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:0 16px}
section#plots h2{grid-column:1/-1}
"""


@dataclass(frozen=True)
class HtmlReport:
    """Everything the page shows; built by ``analysis.report.writer`` from the analysis objects."""

    run_id: str
    record: pd.DataFrame  # analysis.report.table.record_frame(summary, knee)
    knee: KneeResult | None
    baseline: Baseline | None
    recommendations: Recommendations | None
    recommendations_yaml: str = ""
    run_info: Mapping[str, Any] = field(default_factory=dict)
    images: Mapping[str, bytes] = field(default_factory=dict)  # title → PNG bytes
    warnings: tuple[str, ...] = ()
    slo: SloResult | None = None  # SLO verdicts and capacity, when SLOs were given
    cluster_html: str = ""  # links to the cluster files and the energy table (analysis.cluster)
    #: the production watermark's shares of the base capacity used (``--watermark-low/-high``)
    watermark_share: tuple[float, float] | None = None
    workload_html: str = ""  # prefix cache, conversations, classes (analysis.report.workload)
    why: str = ""  # the answer's one line of why (analysis.report.screen.why_line, no "why: ")
    #: predicted capacities at other lengths, beside the answer (analysis.report.whatif_html)
    whatif_html: str = ""


#: the page's sections in reading order: id → its title in the table of contents
SECTIONS = {
    "answer": "Answer",
    "plots": "Throughput and latency",
    "record": "Record table",
    "warnings": "Warnings",
    "not-judged": "Not judged (imported results carry no telemetry)",
    "slo": "SLO capacity and goodput",
    "reasons": "Reasons per stage",
    "workload": "Workload",
    "recommendations": "Recommendations",
    "cluster": "From the knee to your cluster",
    "baseline": "Baseline",
    "more-plots": "More plots",
    "method": "Method",
    "metadata": "Run parameters",
}
#: the plots shown right under the answer (by their titles, analysis.report.figures); the
#: others go to "More plots"
FIRST_PLOTS = ("Throughput vs concurrency", "Latency vs concurrency")


def _images(images: Mapping[str, bytes], marks: Mapping[str, str] | None = None) -> str:
    """The plots as figures; ``marks`` (the answer's, :func:`mark_labels`): the plot's legend
    words for them, in its caption and alt text too, each in a ``data-mark`` span."""
    said = "".join(
        f'; <span class="mark" data-mark="{esc(gid)}">{esc(text)}</span>'
        for gid, text in (marks or {}).items()
    )
    alt = "".join(f"; {text}" for text in (marks or {}).values())
    return "".join(
        f'<figure><img alt="{esc(title + alt)}" '
        f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'
        f"<figcaption>{esc(title)}{said}</figcaption></figure>"
        for title, png in images.items()
    )


def _section(key: str, body: str) -> tuple[str, str]:
    return key, f'<section id="{key}"><h2>{esc(SECTIONS[key])}</h2>\n{body}</section>'


def _toc(keys: Iterable[str]) -> str:
    links = "".join(f'<li><a href="#{k}">{esc(SECTIONS[k])}</a></li>' for k in keys)
    return f'<nav id="toc"><ol>{links}</ol></nav>'


def render_html(report: HtmlReport) -> str:
    """The whole page as one string (UTF-8, no external resources)."""
    warnings = "".join(f'<div class="warn">{esc(w)}</div>' for w in report.warnings)
    first = {t: png for t, png in report.images.items() if t in FIRST_PLOTS}
    first = dict(sorted(first.items(), key=lambda item: FIRST_PLOTS.index(item[0])))
    others = {t: png for t, png in report.images.items() if t not in FIRST_PLOTS}
    knee, recs = report.knee, report.recommendations
    marks = mark_labels(answer_view(knee, recs))  # as the plots draw
    answer = answer_html(knee, recs, watermark_share=report.watermark_share, why=report.why)
    not_judged = items(report.run_info.get("not_judged") or [])
    model = report.run_info.get("model") or "MODEL"
    sections = [
        _section("answer", answer + report.whatif_html),
        _section("plots", _images(first, marks) or "<p>No plots.</p>"),
        _section("record", record_table_html(report.record, knee)),
        _section("warnings", warnings) if warnings else None,
        _section("not-judged", f"<ul>{not_judged}</ul>") if not_judged else None,
        _section("slo", slo_html(report.slo)) if report.slo is not None else None,
        _section("reasons", stages_html(knee)),
        _section("workload", report.workload_html) if report.workload_html else None,
        _section("recommendations", advice_html(recs, report.recommendations_yaml or "", model)),
        _section("cluster", report.cluster_html) if report.cluster_html else None,
        _section("baseline", baseline_html(report.baseline)),
        _section("more-plots", _images(others)) if others else None,
        _section("method", method_html(knee.params if knee else {})),
        _section("metadata", params_html(report.run_info)),
    ]
    shown = [s for s in sections if s is not None]
    head = (
        f"<h1>loadknee report — {esc(report.run_id)}</h1>\n"
        '<p class="sub">Where this server stops scaling, why, and what to configure.</p>'
    )
    body = "\n".join([head, _toc(k for k, _ in shown), *(html for _, html in shown)])
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>loadknee — {esc(report.run_id)}</title><style>{CSS}</style></head>"
        f"<body>\n{body}\n</body></html>\n"
    )
