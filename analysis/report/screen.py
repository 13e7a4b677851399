"""What the terminal shows after an analysis: the answer on one screen, the reasons on request.

:func:`screen_text` is the default output of ``loadknee analyze`` (and so of ``loadknee demo``):
at most about 30 lines for a 9-stage run, none wider than :data:`WIDTH` characters —

1. ``DEPLOY:`` the concurrency to configure and the limit that bound it (the only place the word
   appears), then its capacity interval, one line of why in numbers and the fix in the engine's
   own flags;
2. the run in one line and the record table (``analysis.report.table``), with its legend;
3. the warnings, and where the report is.

Everything else — each stage's verdict with every reason, the bottleneck, the other capacity
figures "for context", the SLO per stage, each recommendation with its reason, the files — is
:func:`explain_text`, printed below the screen with ``--explain`` and kept in ``report.html``.
The rule citations ("(rule: …)") are left out of the screen and kept in the explanation, whose
long lines are wrapped at :data:`WIDTH`, not cut.

Every figure the screen itself prints is read from the values (the deploy answer, the binding
stage's signals, the knee's fit) and formatted by :mod:`loadknee_core.numeric`.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path

from analysis.advice.deploy import binding_stage
from analysis.advice.recommend import ENGINE_SECTIONS
from analysis.cluster.plan import listed
from analysis.model import KneeResult, Signal, StageVerdict
from analysis.pipeline import Analysis
from analysis.report.advice_words import (
    context_lines,
    deploy_bound_text,
    deploy_text,
    flag_words,
    withheld_text,
)
from analysis.report.answer_view import answer_view, capacity_words
from analysis.report.diagnosis_words import bottleneck_text, failures_text
from analysis.report.knee_summary import confidence_words, fit_words, summary_words
from analysis.report.rate_words import rate_knee_text
from analysis.report.refusal_text import refusal_line
from analysis.report.slo_words import breaks_text, limits_text
from analysis.report.stage_reasons import reasons_text
from analysis.report.stage_words import provisional_text
from analysis.report.standing import cannot_tell_text, unjudged_text
from analysis.report.table import (
    fit_columns,
    format_markdown,
    format_text,
    record_columns,
    record_frame,
)
from analysis.report.texts import collect_warnings, recommendations_text, slo_text
from analysis.rules import CITE_PREFIX
from analysis.stages.rate_stages import RateKnee
from loadknee_core.numeric import (
    counted,
    fmt_count,
    fmt_magnitude,
    fmt_ms,
    fmt_ratio,
    fmt_share,
    fmt_users,
)

#: the widest line the screen prints
WIDTH = 100
#: the first line of the explanation, below the screen
EXPLAIN_HEADING = "explain: every reason, with the rule of docs/method.md it follows"

#: what an imported run's screen says of the signals its source could not give
NOT_JUDGED = "not judged (imported results carry no telemetry):"

_CITATION = re.compile(r"\s*\(" + re.escape(CITE_PREFIX) + r"[^)]*\)")


def uncited(text: str) -> str:
    """``text`` without its "(rule: …)" citations (the screen keeps them for --explain)."""
    return _CITATION.sub("", text)


def wrapped(text: str, *, first: str = "", rest: str = "  ", width: int = WIDTH) -> list[str]:
    """``first`` + ``text`` in lines of at most ``width`` (a longer word stays whole, and a
    number stays with its " %")."""
    lines = textwrap.wrap(
        text.replace(" %", "\xa0%"),
        width,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [line.replace("\xa0", " ") for line in lines] or [first.rstrip()]


def _tail_name(knee: KneeResult) -> str:
    return str(knee.params.get("tail_percentile") or "p95").upper()


def _tail_metric_name(knee: KneeResult) -> str:
    """ "P95", or "P95 slowdown" where the tail is each request's slowdown (a replayed log)."""
    name = _tail_name(knee)
    return f"{name} slowdown" if knee.params.get("tail_metric") == "slowdown" else name


#: signal name → its figures in a few words, against their limit; in the order the why line
#: lists them (the knee's own two first), as many as fit
_PHRASES: dict[str, Callable[[Signal, KneeResult], str]] = {
    # first: a refusal is what ended the capacity, whatever else the stage shows
    "refusals": lambda s, k: f"{fmt_share(s.value)} of requests refused at once",
    "throughput_flattening": lambda s, k: (
        f"gain per user {fmt_share(_pct(s.value))} of one user's "
        f"(flat < {fmt_share(_pct(s.threshold))})"
    ),
    "tail_departure": lambda s, k: (
        f"{_tail_metric_name(k)} {fmt_ratio(s.value)} baseline (limit {fmt_ratio(s.threshold)})"
    ),
    "server_saturated": lambda s, k: (
        f"{fmt_magnitude(s.value)} waiting, all {fmt_users(k.server_slots)} slots busy"
    ),
    "client_saturated": lambda s, k: f"{fmt_magnitude(s.value)} waiting (seen from the client)",
    "sla": lambda s, k: f"{_tail_name(k)} {fmt_ms(s.value)} above the SLA of {fmt_ms(s.threshold)}",
    "memory_pressure": lambda s, k: (
        f"memory {fmt_share(s.value)} (pressure at {fmt_share(s.threshold)})"
    ),
    "oom": lambda s, k: f"GPU memory {fmt_share(s.value)} with failed requests (out of memory)",
    "error_rate": lambda s, k: (
        f"{fmt_share(s.value)} errors (red line above {fmt_share(s.threshold)})"
    ),
    "errors": lambda s, k: f"{fmt_share(s.value)} of requests failed",
}
#: a fired signal left out of the why line when the first one fired too (it says the same)
_SAME_AS: dict[str, str] = {"errors": "error_rate", "client_saturated": "server_saturated"}


def _pct(ratio: float | None) -> float | None:
    return None if ratio is None else ratio * 100


def _phrases(verdict: StageVerdict, knee: KneeResult) -> list[str]:
    fired = {s.name: s for s in verdict.signals if s.fired}
    for name, same in _SAME_AS.items():
        if same in fired:
            fired.pop(name, None)
    if "refusals" in fired:  # the refusal phrase already counts the failures
        fired.pop("errors", None)
    return [make(fired[name], knee) for name, make in _PHRASES.items() if name in fired]


def _fit(head: str, phrases: list[str], width: int) -> str:
    """``head`` and as many phrases as fit in ``width`` (the first always)."""
    line = head + phrases[0]
    for phrase in phrases[1:]:
        if len(line) + 2 + len(phrase) > width:
            break
        line += "; " + phrase
    return line


def why_line(analysis: Analysis, *, width: int = WIDTH) -> str:
    """One line: the figures of the stage that bound the answer, against their limits."""
    knee, deploy, slo = analysis.knee, analysis.recommendations.deploy, analysis.slo
    if deploy is None:
        return "why: " + uncited(summary_words(knee))
    if deploy.bound == "tested_range":
        top = max((v.target_users for v in knee.judged), default=0)
        return f"why: no limit broken up to {counted(top, 'user')}: the server was not saturated"
    if deploy.bound == "sla" and slo is not None and slo.capacity == deploy.users:
        broken = next(
            (s for s in slo.stages if not s.met and s.target_users > (deploy.users or 0)), None
        )
        if broken is not None and broken.breaks:
            return _fit(
                f"why: at {counted(broken.target_users, 'user')} ",
                breaks_text(broken.breaks),
                width,
            )
    stage = binding_stage(knee, deploy.bound)
    phrases = [] if stage is None else _phrases(stage, knee)
    if stage is None or not phrases:
        return "why: " + uncited(deploy_text(deploy))
    head = "why: no hard knee; " if deploy.bound == "tail" else "why: "
    return _fit(f"{head}at {counted(stage.target_users, 'user')}: ", phrases, width)


def fix_lines(analysis: Analysis, *, width: int = WIDTH) -> list[str]:
    """The engine flags to set, each with the measurement it rests on (a flag to try says its
    condition: raise it and re-run), or the first setting withheld with what to do instead."""
    recs = analysis.recommendations
    flags = [
        i for i in recs.items if i.key.partition(".")[0] in ENGINE_SECTIONS and i.value is not None
    ]
    if flags:
        return wrapped("; ".join(flag_words(i) for i in flags), first="fix: ", width=width)
    if recs.withheld:
        return wrapped(uncited(withheld_text(recs.withheld[0])), first="fix: ", width=width)
    return ["fix: no server flag to change from this run"]


def rate_answer_lines(rate_knee: RateKnee, *, width: int = WIDTH) -> list[str]:
    """An open-loop run's answer: the highest rate that held (and within the SLOs), the rate
    knee and why. Its stages each ran one dispatcher per process, so the concurrency verdicts
    ("1 user") are no answer: they stay in ``--explain`` and the report."""
    best = rate_knee.slo_max_rate_rps
    if best is None:
        best = rate_knee.max_rate_rps
    within = " within the SLOs" if rate_knee.slo_max_rate_rps is not None else ""
    head = (
        "DEPLOY: no rate held: lower the first --rates stage"
        if best is None
        else f"DEPLOY: at most {fmt_magnitude(best)} requests/s{within}, bound by the rate knee"
    )
    return [
        head,
        *wrapped(rate_knee_text(rate_knee), first="why: ", width=width),
        "fix: open-loop stages judge the rate; the concurrency verdicts are in --explain",
    ]


def answer_lines(analysis: Analysis, *, width: int = WIDTH) -> list[str]:
    """DEPLOY, its interval, the why and the fix (and the SLO answer, a cut run's warning)."""
    knee, recs, slo = analysis.knee, analysis.recommendations, analysis.slo
    if analysis.rate_knee is not None:
        return rate_answer_lines(analysis.rate_knee, width=width)
    deploy, standing = recs.deploy, analysis.standing
    lines: list[str] = []
    if standing.cannot_tell:  # no DEPLOY line: the reason and what to do instead
        lines += wrapped(uncited(cannot_tell_text(standing, knee)), width=width)
        if recs.provisional:
            lines += wrapped(
                uncited(provisional_text(recs.provisional)), first="cut short: ", width=width
            )
        return lines
    if deploy is None:
        lines.append("DEPLOY: nothing: no stage could be judged")
    elif deploy.users is None:
        lines += wrapped(uncited(deploy_text(deploy)), first="DEPLOY: none: ", width=width)
    else:
        bound = deploy_bound_text(deploy)
        if deploy.bound == "sla" and slo is not None and slo.capacity == deploy.users:
            bound = "the SLOs"
        elif deploy.bound == "tail":
            bound = "the tail's departure (no hard knee)"
        elif deploy.bound == "tested_range":
            above = [u for u in standing.unjudged if u > (deploy.users or 0)]
            bound = "the judged stages only" if above else "the tested range only"
        lines += wrapped(
            f"DEPLOY: {counted(deploy.users, 'concurrent request')}, bound by {bound}", width=width
        )
    interval = [capacity_words(answer_view(knee, recs))] if knee.stages else []
    if slo is not None:
        cap = "none" if slo.capacity is None else counted(slo.capacity, "user")
        interval.append(f"SLO capacity {cap} ({limits_text(slo.params)}), {slo.binding}-bound")
    if interval:
        lines += wrapped("; ".join(interval), width=width)
    refused = refusal_line(analysis)
    if refused is not None:
        lines += wrapped(refused, first="refused: ", width=width)
    lines.append(why_line(analysis, width=width))
    lines += fix_lines(analysis, width=width)
    if recs.provisional:
        lines += wrapped(
            uncited(provisional_text(recs.provisional)), first="cut short: ", width=width
        )
    if standing.kind == "partial":
        lines += wrapped(uncited(unjudged_text(standing)), first="partial: ", width=width)
    return lines


def screen_text(
    analysis: Analysis, paths: Mapping[str, Path], *, width: int = WIDTH, markdown: bool = False
) -> str:
    """The answer, the record table, the warnings and where the report is: one screen.

    ``markdown``: the table as markdown, every column (``--format markdown``)."""
    record = record_frame(analysis.summary, analysis.knee, analysis.slo, analysis.rate_stages)
    table = (format_markdown(record) if markdown else format_text(record, width=width)).splitlines()
    rows = [line for line in table if not line.startswith("(not shown")]
    legend = "reqs: measured requests; secs: measured seconds; — not measured"
    if not markdown:
        dropped = fit_columns(record, width, record_columns(record))[1]
        legend += f"; {len(dropped)} more columns in record.md" if dropped else ""
    missing = analysis.run.run_info.get("not_judged") or []
    lines = [
        *answer_lines(analysis, width=width),
        "",
        f"run {analysis.run_id}: {fmt_count(len(analysis.run.requests))} requests, "
        f"{len(analysis.summary)} stages",
        *rows,
        *wrapped(legend, width=width),
        *(wrapped(", ".join(missing), first=NOT_JUDGED + " ", width=width) if missing else []),
        *(
            line
            for w in collect_warnings(analysis)
            for line in wrapped(uncited(w), first="warning: ", width=width)
        ),
        f"report: {paths['report.html']}",
        "every reason and the rules behind it: --explain, or the report",
    ]
    return "\n".join(lines)


def _stage_lines(sv: StageVerdict, width: int) -> list[str]:
    trust = "" if sv.trusted else " (untrusted: client-bound)"
    trust += " (untrusted: noisy)" if sv.noisy else ""
    lines = [f"  {counted(sv.target_users, 'user')}: {sv.verdict.replace('_', ' ')}{trust}"]
    for reason in reasons_text(sv):
        lines += wrapped(reason, first="    - ", rest="      ", width=width)
    if sv.bottleneck != "none":
        reason = bottleneck_text(sv.bottleneck_reason)
        why = f": {reason}" if reason else ""
        lines += wrapped(f"{sv.bottleneck}{why}", first="    bottleneck: ", rest="      ")
    if sv.failures:
        lines += wrapped(
            failures_text(sv.failures), first="    failures: ", rest="      ", width=width
        )
    return lines


def explain_text(analysis: Analysis, paths: Mapping[str, Path], *, width: int = WIDTH) -> str:
    """Every reason behind the screen, each with its rule: the answer in full, the knee and each
    stage's reasons, the other capacity figures, the SLO, each recommendation, the files."""
    knee, recs = analysis.knee, analysis.recommendations
    lines = [EXPLAIN_HEADING, ""]
    if recs.deploy is not None:
        lines += wrapped(deploy_text(recs.deploy), first="the answer: ", width=width)
    lines += wrapped(summary_words(knee), first="knee: ", width=width)
    if confidence := confidence_words(knee):
        lines += wrapped(confidence + ".", first="confidence: ", width=width)
    if fit := fit_words(knee):
        lines += wrapped(fit, first="fit: ", width=width)
    lines.append("stages:")
    for sv in sorted(knee.stages, key=lambda v: (v.target_users, v.stage)):
        lines += _stage_lines(sv, width)
    if recs.deploy is not None:
        lines.append("other figures, for context:")
        for line in context_lines(knee, recs.get("production_watermark")):
            lines += wrapped(line, first="  ", rest="    ", width=width)
    if analysis.slo is not None:
        for line in slo_text(analysis.slo).splitlines():
            lines += wrapped(line.strip(), first="  " if line.startswith(" ") else "", width=width)
    lines.append("recommendations:")
    for line in recommendations_text(recs).splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        lines += wrapped(line.strip(), first=indent, rest=indent + "    ", width=width)
    missing = analysis.run.run_info.get("not_judged") or []
    if missing:
        lines.append(NOT_JUDGED)
        lines += [line for m in missing for line in wrapped(m, first="  - ", rest="    ")]
    report_dir = paths["report.html"].parent
    lines += wrapped(", ".join(listed(dict(paths))), first=f"files in {report_dir}/: ", width=width)
    return "\n".join(lines)
