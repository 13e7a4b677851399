"""The self-contained HTML report: one file, inline CSS, plots as base64 PNGs, no external links.

It reads top-down, in the order a reviewer asks (:data:`SECTIONS`, each a ``<section id>``
linked from the table of contents at the top): the answer (the deploy figure, the capacity, the
first stage past it) and its one line of why, beside it a small what-if table (the capacity the
model fitted from the run predicts at other lengths, :mod:`analysis.report.whatif_html`); the
throughput and latency plots with the capacity marked; the record table (each stage's reasons
folded in a row under its figures, so the table stays readable from 1280 to 1920 pixels) and
what its columns mean; the warnings; then the detail: the SLO answer, the reasons and signals of
every stage and the diagnosis, the workload (only the parts that apply: a prefix cache that
never hit shows nothing), the recommendations (YAML and server flags, each with its reason), the
cluster files, the baseline, the other plots, the method, and the run's parameters folded in a
``<details>``, without empty values and with file names in place of absolute paths (where a file
lay on the machine that ran the sweep names its user's folders and says nothing to a reader
elsewhere).

Secrets never reach the page: :func:`redact` drops every run.json key whose name has a part
``key``/``token``/``secret``/``password``/``auth``/``credential`` (``api_key``, ``hf_token``,
``X-Auth``; not ``input_tokens``), any string value that looks like a bearer token, and the
user:password part of URLs. Every other text is escaped with :func:`html.escape`.
Hand-written with the stdlib rather than a template engine: the page is one function deep and
jinja2 is not a declared dependency.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PureWindowsPath
from typing import Any

import pandas as pd

from analysis.advice.facts import Recommendations
from analysis.advice.recommend import flag_text
from analysis.model import PERCENTILE_METHOD, Baseline, KneeResult, StageVerdict
from analysis.report.advice_words import (
    BOUND_WORDS,
    deploy_text,
    flag_words,
    is_conditional,
    reason_text,
    withheld_text,
)
from analysis.report.answer_view import AnswerView, answer_view, interval_words, mark_labels
from analysis.report.colours import VERDICT_COLOURS
from analysis.report.diagnosis_words import bottleneck_text
from analysis.report.knee_summary import summary_words
from analysis.report.knee_words import signal_text
from analysis.report.slo_words import breaks_text, limits_text, summary_text
from analysis.report.stage_reasons import reasons_text
from analysis.report.table import fmt_magnitude, fmt_text, record_columns
from analysis.slo.evaluate import SloResult
from loadknee_core.numeric import counted, is_missing
from loadknee_core.redaction import is_secret_name

_SECRET_VALUE = re.compile(r"^(sk-|Bearer\s|hf_|ghp_|xox[bp]-)", re.IGNORECASE)
_URL_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/@\s]+@", re.IGNORECASE)
WITHHELD = "[withheld]"


def is_secret_key(key: str) -> bool:
    """True for ``api_key``, ``OPENAI_API_KEY``, ``hfToken``, not ``max_tokens``."""
    return is_secret_name(str(key))


def redact(value: Any) -> Any:
    """A copy of ``value`` without secret keys, token-looking strings or URL credentials."""
    if isinstance(value, Mapping):
        return {k: redact(v) for k, v in value.items() if not is_secret_key(str(k))}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str):
        if _SECRET_VALUE.match(value.strip()):
            return WITHHELD
        return _URL_USERINFO.sub(r"\g<scheme>", value)
    return value


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

ROW_TINTS = {
    "comfortable": "#e8f5e9",
    "critical": "#fff8e1",
    "knee": "#fff3e0",
    "red_line": "#ffebee",
    "insufficient_data": "#f5f5f5",
}


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


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _table(headers: Iterable[str], rows: Iterable[Iterable[str]], *, numeric=()) -> str:
    """An HTML table; cells are already-escaped HTML, ``numeric`` = right-aligned column indexes."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _verdict_key(label: Any) -> str:
    text = "" if is_missing(label) else str(label).rstrip("*")
    return text.replace(" ", "_")


def _why_row(row: Mapping[Any, Any], verdict: StageVerdict | None, span: int) -> str:
    """The stage's reasons (and what broke its SLO) in a row of their own under its figures,
    folded: a column of sentences squeezed the table and made every row a screen tall."""
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
    items = "".join(f"<li>{esc(r)}</li>" for r in reasons)
    return (
        f'<tr class="why" data-stage="{esc(row.get("stage"))}"><td colspan="{span}"><details>'
        f"<summary>why: {esc(fmt_text(row.get('verdict')))} at {esc(users)} "
        f"({counted(len(reasons), 'reason')})</summary><ul>{items}</ul></details></td></tr>"
    )


def record_table_html(record: pd.DataFrame, knee: KneeResult | None = None) -> str:
    """The record table, each stage's reasons folded in a row under its figures."""
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
    )


def _value(value: Any) -> str:
    if isinstance(value, float):
        return fmt_magnitude(value)
    if isinstance(value, list | tuple):
        return "–".join(_value(v) for v in value) if len(value) == 2 else esc(value)
    return esc(fmt_text(value))


def _watermark_hint(report: HtmlReport) -> str:
    """``70–80 % of base capacity``, the shares the watermark was computed with."""
    if report.watermark_share is None:
        return "a share of base capacity"
    low, high = report.watermark_share
    return f"{low * 100:g}–{high * 100:g} % of base capacity"


def _capacity_hint(view: AnswerView) -> str:
    """The capacity tile's small print: its interval, or why it shows none beside it."""
    if view.capacity is not None and not view.reached:
        return "not reached: untested above; " + interval_words(view)
    return interval_words(view)


def _headline(report: HtmlReport) -> str:
    """The deploy figure first, then the capacity with its interval, the first stage past it
    and the other figures (each tile's ``data-name`` is its name in docs/method.md)."""
    knee, recs = report.knee, report.recommendations
    view = answer_view(knee, recs)
    bound = ""
    if recs is not None and recs.deploy is not None:
        bound = BOUND_WORDS.get(recs.deploy.bound, recs.deploy.bound.replace("_", " "))
    past = f"first stage past capacity ({view.past})" if view.past else "first stage past capacity"
    told = f"concurrent requests to configure; bound by {bound}" if bound else "no figure"
    cards: list[tuple[str, str, Any, str]] = [
        ("deploy", "deploy", view.deploy, told),
        ("capacity", "capacity", view.capacity, _capacity_hint(view)),
        ("past", past, view.past_users, "users: where the limit broke"),
        ("base_capacity", "base capacity", None if knee is None else knee.base_capacity,
         "tail/memory/success ok"),
    ]  # fmt: skip
    if knee is not None and knee.red_line_users is not None and view.past != "red line":
        cards.append(("red_line", "red line", knee.red_line_users, "errors, OOM, timeouts"))
    if recs is not None:
        for key, value in ((i.key, i.value) for i in recs.items):
            if "watermark" in key:
                cards.append(("watermark", "production watermark", value, _watermark_hint(report)))
                break
    html_cards = "".join(
        f'<div class="card" data-name="{name}" data-value="{esc("" if value is None else value)}">'
        f"<span>{esc(title)}</span><b>"
        f"{'none' if value is None else _value(value)}</b><span>{esc(hint)}</span></div>"
        for name, title, value, hint in cards
    )
    deploy = ""
    if recs is not None and recs.deploy is not None:
        deploy = f'<p class="deploy"><b>Deploy:</b> {esc(deploy_text(recs.deploy))}</p>'
    why = f'<p class="why"><b>Why:</b> {esc(report.why)}</p>' if report.why else ""
    return f'<div class="cards">{html_cards}</div>{deploy}{why}{report.whatif_html}'


def _slo_section(slo: SloResult | None) -> str:
    """Both answers side by side: the limits used (a preset never hides its numbers), the SLO
    capacity against the knee, what binds, and per stage goodput and what broke."""
    if slo is None:
        return ""
    cards = [
        ("SLO capacity", slo.capacity, "highest users meeting every SLO"),
        ("max concurrency (knee)", slo.max_concurrency, "throughput-bound answer"),
        ("binding", f"{slo.binding}-bound", "the smaller of the two decides"),
    ]
    html_cards = "".join(
        f'<div class="card"><span>{esc(title)}</span><b>'
        f"{'none' if value is None else esc(value)}</b><span>{esc(hint)}</span></div>"
        for title, value, hint in cards
    )
    sources = "".join(f"<li>preset {esc(s)}</li>" for s in slo.sources)
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
    table = _table(
        ("users", "SLO", "good %", "good req/s", "good out tok/s", "broken by"),
        rows,
        numeric=(0, 2, 3, 4),
    )
    return (
        f"<p>Limits used: <b>{esc(limits_text(slo.params))}</b></p>"
        f"<ul>{sources}</ul>"
        f'<div class="cards">{html_cards}</div><p>{esc(summary_text(slo))}</p>{table}'
    )


def _reasons(knee: KneeResult | None) -> str:
    if knee is None:
        return "<p>No verdicts.</p>"
    parts = []
    for sv in knee.stages:
        colour = VERDICT_COLOURS.get(sv.verdict, "#424242")
        trust = "" if sv.trusted else " — <b>untrusted: client-bound</b>"
        reasons = (
            "".join(f"<li>{esc(r)}</li>" for r in reasons_text(sv)) or "<li>no rule fired</li>"
        )
        signals = _table(
            ("signal", "fired", "value", "threshold", "in words"),
            (
                (
                    esc(s.name),
                    '<span class="fired">yes</span>'
                    if s.fired
                    else '<span class="quiet">no</span>',
                    fmt_magnitude(s.value),
                    fmt_magnitude(s.threshold),
                    esc(signal_text(s)),
                )
                for s in sv.signals
            ),
            numeric=(2, 3),
        )
        parts.append(
            f'<h3>{counted(sv.target_users, "user")} — <span style="color:{colour}">'
            f"{esc(sv.verdict.replace('_', ' '))}</span>{trust}</h3><ul>{reasons}</ul>"
            f"<details><summary>signals</summary>{signals}</details>"
        )
    return "".join(parts)


def _diagnosis(knee: KneeResult | None) -> str:
    if knee is None:
        return ""
    rows = [
        (
            str(sv.target_users),
            esc(sv.bottleneck),
            esc(bottleneck_text(sv.bottleneck_reason) or "none"),
        )
        for sv in knee.stages
    ]
    return _table(("users", "likely bottleneck", "why"), rows, numeric=(0,))


def _recommendations(report: HtmlReport) -> str:
    """The settings with their reasons, the YAML, then the server flags: only the flags to set
    go in the ``vllm serve`` command; a flag to try (the server's own limit, memory to spare) is
    a suggestion with its condition, never a command to paste."""
    recs = report.recommendations
    if recs is None:
        return "<p>No recommendations.</p>"
    rows = [(esc(i.key), _value(i.value), esc(reason_text(i))) for i in recs.items]
    model = report.run_info.get("model") or "MODEL"
    flags = [i for i in recs.items if i.key.startswith("vllm.") and i.value is not None]
    ready = [flag_text(i) for i in flags if not is_conditional(i)]
    joined = " \\\n  ".join(ready)
    command = (
        f"<pre>vllm serve {esc(model)} \\\n  {esc(joined)}</pre>"
        if ready
        else "<p>No flag to set from this run.</p>"
    )
    tries = [i for i in flags if is_conditional(i)]
    suggestions = "".join(
        f'<li class="try" data-flag="{esc(flag_text(i))}">{esc(flag_words(i))}</li>' for i in tries
    )
    return (
        _table(("setting", "value", "reason"), rows)
        + f"<h3>YAML</h3><pre>{esc(report.recommendations_yaml or '')}</pre>"
        + f"<h3>Server flags (vLLM)</h3>{command}"
        + (f"<h3>To try, then re-run</h3><ul>{suggestions}</ul>" if suggestions else "")
        + _flag_origins(recs)
    )


def _flag_origins(recs: Recommendations) -> str:
    """What each flag to set came from, and the flags withheld with their reason."""
    items = [
        f"<li><code>{esc(flag_text(i))}</code>: {esc(reason_text(i))}</li>"
        for i in recs.items
        if i.key.startswith("vllm.") and i.value is not None and not is_conditional(i)
    ]
    items += [f"<li>{esc(withheld_text(note))}</li>" for note in recs.withheld]
    return f"<ul>{''.join(items)}</ul>" if items else ""


def _baseline(baseline: Baseline | None) -> str:
    if baseline is None:
        return "<p>No baseline.</p>"
    rows = [
        ("source", esc(baseline.source)),
        ("requests", esc(baseline.requests)),
        (
            "e2e P50 / P95 (ms)",
            f"{fmt_magnitude(baseline.e2e_p50_ms)} / {fmt_magnitude(baseline.e2e_p95_ms)}",
        ),
        (
            "TTFT P50 / P95 (ms)",
            f"{fmt_magnitude(baseline.ttft_p50_ms)} / {fmt_magnitude(baseline.ttft_p95_ms)}",
        ),
        (
            "s per 1k total tokens P50 / P95",
            f"{fmt_magnitude(baseline.s_per_1k_total_p50)} / "
            f"{fmt_magnitude(baseline.s_per_1k_total_p95)}",
        ),
        (
            "s per 1k completion tokens P50 / P95",
            f"{fmt_magnitude(baseline.s_per_1k_completion_p50)} / "
            f"{fmt_magnitude(baseline.s_per_1k_completion_p95)}",
        ),
        ("single-user output tok/s", fmt_magnitude(baseline.output_tok_s)),
    ]
    return _table(("baseline", "value"), rows)


def _not_judged(run_info: Mapping[str, Any]) -> str:
    """What an imported run cannot say (no telemetry in another tool's records), as a list."""
    missing = run_info.get("not_judged") or []
    return "".join(f"<li>{esc(m)}</li>" for m in missing)


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
#: what the record table's less obvious columns mean, under the table
RECORD_LEGEND = (
    "reqs: measured requests; secs: measured seconds; excluded: requests left out because "
    "their token counts missed the target; resent: requests sent again on a fresh connection; "
    "— not measured; - none. Open a row's \u201cwhy\u201d for its reasons."
)


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


def local_paths(value: Any) -> Any:
    """A copy of ``value`` without empty values (``None``, ``""``, ``{}``, ``[]``) and with each
    absolute path shortened to its file name."""
    if isinstance(value, Mapping):
        kept = {k: local_paths(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None and v not in ("", {}, [])}
    if isinstance(value, list | tuple):
        return [local_paths(v) for v in value]
    if isinstance(value, str) and _ABSOLUTE_PATH.match(value):
        return PureWindowsPath(value).name or value  # splits at / and at a backslash
    return value


_ABSOLUTE_PATH = re.compile(r"^(/|[A-Za-z]:\\)[^\s]*$")


def _section(key: str, body: str, *, title: str | None = None) -> tuple[str, str]:
    heading = SECTIONS[key] if title is None else title
    return key, f'<section id="{key}"><h2>{esc(heading)}</h2>\n{body}</section>'


def _toc(keys: Iterable[str]) -> str:
    links = "".join(f'<li><a href="#{k}">{esc(SECTIONS[k])}</a></li>' for k in keys)
    return f'<nav id="toc"><ol>{links}</ol></nav>'


def render_html(report: HtmlReport) -> str:
    """The whole page as one string (UTF-8, no external resources)."""
    warnings = "".join(f'<div class="warn">{esc(w)}</div>' for w in report.warnings)
    first = {t: png for t, png in report.images.items() if t in FIRST_PLOTS}
    first = dict(sorted(first.items(), key=lambda item: FIRST_PLOTS.index(item[0])))
    others = {t: png for t, png in report.images.items() if t not in FIRST_PLOTS}
    marks = mark_labels(answer_view(report.knee, report.recommendations))  # as the plots draw
    params = json.dumps(
        local_paths(redact(dict(report.run_info))), indent=2, sort_keys=True, default=str
    )
    knee_params = json.dumps(
        redact(report.knee.params if report.knee else {}), indent=2, default=str
    )
    summary = "" if report.knee is None else f"<p>{esc(summary_words(report.knee))}</p>"
    diagnosis = _diagnosis(report.knee)
    not_judged = _not_judged(report.run_info)
    method = (
        f"<p>Percentiles: {esc(PERCENTILE_METHOD)}. Statistics use the measured window of each "
        "stage only (warm-up and cooldown excluded; requests whose token counts missed the "
        "target are counted and left out).</p>"
        "<details><summary>Knee thresholds</summary>"
        f"<pre>{esc(knee_params)}</pre></details>"
    )
    sections = [
        _section("answer", _headline(report)),
        _section("plots", _images(first, marks) or "<p>No plots.</p>"),
        _section(
            "record",
            record_table_html(report.record, report.knee)
            + f'<p class="legend">{esc(RECORD_LEGEND)}</p>',
        ),
        _section("warnings", warnings) if warnings else None,
        _section("not-judged", f"<ul>{not_judged}</ul>") if not_judged else None,
        _section("slo", _slo_section(report.slo)) if report.slo is not None else None,
        _section(
            "reasons",
            summary
            + _reasons(report.knee)
            + (f"<h3>Diagnosis</h3>{diagnosis}" if diagnosis else ""),
        ),
        _section("workload", report.workload_html) if report.workload_html else None,
        _section("recommendations", _recommendations(report)),
        _section("cluster", report.cluster_html) if report.cluster_html else None,
        _section("baseline", _baseline(report.baseline)),
        _section("more-plots", _images(others)) if others else None,
        _section("method", method),
        _section(
            "metadata",
            "<details><summary>run.json, secrets withheld, empty values left out, file names "
            f"for absolute paths</summary><pre>{esc(params)}</pre></details>",
        ),
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
