"""The SLO verdicts in words: the targets used, what broke each stage, the capacity's summary and
doubt, and the traffic classes, written from their values.

The SLO step (:mod:`analysis.slo`) returns records (:mod:`analysis.slo.facts`, the
:class:`~analysis.slo.evaluate.SloResult`, the :class:`~analysis.slo.classes.ClassesResult`);
this module is the one place that turns them into the words the screen, ``--explain``,
record.md, report.html, the recommendations and knee.json show, with the number formats of
:mod:`loadknee_core.numeric`, so a rewording is one change here and one reviewed diff of the golden
files.
"""

from __future__ import annotations

from analysis.slo.classes import ClassesResult
from analysis.slo.evaluate import SloResult
from analysis.slo.facts import CapacityDoubt, SloBreak, SloCheck
from loadknee_core.numeric import NA, counted, sig4
from loadknee_core.slo_targets import SloParams

#: what a break of the knee's red line says
RED_LINE = "red line: requests failed or the server ran out of memory"
#: what goodput asked without the raw rows says
NEEDS_ROWS = "goodput needs the raw requests (requests.csv)"


def limits_text(params: SloParams) -> str:
    """Every target used, in words (printed by the report whatever the source)."""
    parts = [s.text() for s in params.slos]
    if params.goodput:
        good = " and ".join(t.text() for t in params.goodput)
        parts.append(f"goodput: a request is good when {good}; ≥ {params.goodput_min_pct:g} % good")
    return "; ".join(parts) if parts else "none"


def check_text(check: SloCheck) -> str:
    """A broken target: its figure over its limit and by how much, or that it was not measured."""
    target = check.slo.text()
    if check.value is None:
        return f"{target}: not measured in this stage"
    over = check.over_pct or 0.0
    by = f"{over:.1f}" if over < 10 else f"{over:.0f}"  # "+0 %" would read as not broken
    name, unit = target.split(" ≤ ")[0], check.slo.unit
    return f"{name} {sig4(check.value)} {unit} > {check.limit:g} {unit} (+{by} %)"


def break_text(broken: SloBreak) -> str:
    """One reason a stage broke the SLOs, in words."""
    if broken.check is not None:
        return check_text(broken.check)
    if broken.kind == "goodput_short":
        shown = NA if broken.good_pct is None else f"{broken.good_pct:.1f} %"
        return f"good requests {shown} < {broken.min_pct or 0.0:g} %"
    if broken.kind == "goodput_needs_rows":
        return NEEDS_ROWS
    return RED_LINE


def breaks_text(breaks: tuple[SloBreak, ...]) -> list[str]:
    """A stage's breaks in words, in order."""
    return [break_text(b) for b in breaks]


def doubt_text(doubt: CapacityDoubt | None) -> str:
    """Why the SLO capacity may be off, in words; "" when it can be trusted."""
    if doubt is None:
        return ""
    parts = []
    if doubt.breaker_noisy_users is not None:
        parts.append(
            f"the {doubt.breaker_noisy_users}-user stage that breaks it is too noisy "
            "or short to judge, so the capacity may be higher"
        )
    if doubt.passes_again_users:
        parts.append(
            f"{', '.join(map(str, doubt.passes_again_users))} users met every SLO again above "
            "the break, so it may be noise"
        )
    if doubt.setter_noisy_users is not None:
        parts.append(
            f"the {doubt.setter_noisy_users}-user stage that sets it is too noisy or "
            "short to judge, so the capacity may be lower"
        )
    return (
        "Uncertain: " + "; ".join(parts) + ". Rerun with longer stages (--stage-requests or "
        "--stage-seconds) before planning on it."
    )


def summary_text(slo: SloResult) -> str:
    """The SLO capacity against the knee, what binds, the first break, and the doubt."""
    first_bad = slo.first_broken
    why = (
        f" {counted(first_bad.target_users, 'user')} breaks: "
        f"{'; '.join(breaks_text(first_bad.breaks))}."
        if first_bad is not None
        else ""
    )
    doubt = doubt_text(slo.doubt)
    tail = why + (" " + doubt if doubt else "")
    if slo.capacity is None:
        return "SLO capacity: none, no tested stage meets the SLOs (latency-bound)." + tail
    head = (
        f"SLO capacity {counted(slo.capacity, 'user')}; the knee's max_concurrency "
        f"{slo.max_concurrency}."
    )
    if slo.binding == "latency":
        return (
            head + " Latency-bound: the SLOs allow no more users than the knee, so plan fewer "
            "users per replica and more replicas for the same peak." + tail
        )
    if slo.binding == "throughput":
        return (
            head + " Throughput-bound: the knee binds first and the SLOs have headroom at "
            "max_concurrency." + tail
        )
    return head + tail


def classes_text(result: ClassesResult) -> str:
    """Each class's shares and SLO capacity, then the binding class and what broke it first."""
    lines = []
    for r in result.classes:
        shares = [v for k, v in sorted(r.shares.items()) if k != 0]
        spread = f"{min(shares):.1f}–{max(shares):.1f} % of each stage's requests" if shares else NA
        head = (
            f"class {r.spec.name} (weight {r.spec.weight:g}, {r.spec.input_tokens} → "
            f"{r.spec.output_tokens} tokens): {spread}"
        )
        if r.slo is None:
            lines.append(head + "; no SLO")
            continue
        cap = "no stage" if r.capacity is None else f"{r.capacity} users"
        lines.append(f"{head}; SLO {limits_text(r.slo.params)}: met up to {cap}")
    binding = result.binding_class
    if binding is not None:
        name = binding.spec.name
        if binding.first_broken is None:
            lines.append(f"binding class: {name} (every class met its SLOs at every level)")
        else:
            stages = binding.slo.stages if binding.slo is not None else ()
            broken = [s for s in stages if s.target_users == binding.first_broken]
            what = "; ".join(breaks_text(broken[0].breaks)) if broken else "its SLO"
            lines.append(
                f"binding class: {name} breaks its SLO first, at {binding.first_broken} users "
                f"({what})"
            )
    return "\n".join(lines)


def slo_json(slo: SloResult) -> dict[str, object]:
    """knee.json's ``slo`` section: the verdicts with their words, in the layout of schema 1."""
    return {
        "limits": limits_text(slo.params),
        "sources": list(slo.sources),
        "stages": [
            {
                "stage": s.stage,
                "target_users": s.target_users,
                "met": s.met,
                "checks": [
                    {
                        "key": c.key,
                        "text": c.slo.text(),
                        "value": c.value,
                        "limit": c.limit,
                        "met": c.met,
                        "over_pct": c.over_pct,
                    }
                    for c in s.checks
                ],
                "breaks": breaks_text(s.breaks),
                "good_requests": s.good_requests,
                "judged_requests": s.judged_requests,
                "good_pct": s.good_pct,
                "goodput_rps": s.goodput_rps,
                "good_output_tok_s": s.good_output_tok_s,
            }
            for s in slo.stages
        ],
        "capacity": slo.capacity,
        "max_concurrency": slo.max_concurrency,
        "binding": slo.binding,
        "summary": summary_text(slo),
        "doubt": doubt_text(slo.doubt),
    }
