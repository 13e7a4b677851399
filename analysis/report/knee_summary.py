"""The knee's answer in words: its summary, the fit over all stages, its confidence and why a
stage's rows could not be judged, each written from its fact (:mod:`analysis.knee.facts`,
:class:`analysis.stages.data_check.RowsFact`); the signals' words are
:mod:`analysis.report.knee_words`'.
"""

from __future__ import annotations

from analysis import rules
from analysis.knee.facts import ConfidenceFact, KneeSummaryFact
from analysis.knee.fit import KneeFit
from analysis.numeric import counted
from analysis.report.knee_words import TAIL_SOURCES, capacity_words
from analysis.stages.data_check import RowsFact

#: what a stage whose rows mostly missed the requested lengths should change
LENGTH_ADVICE = (
    "the server ignores the requested lengths (it stops at its own end-of-sequence or caps "
    "max_tokens, or counts the prompt differently): let it honour ignore_eos/min_tokens (vLLM, "
    "SGLang and llama.cpp do), raise its max_tokens / context cap, or replay a prompt log "
    "(--llm-prompt-log) where lengths are not pinned"
)


def rows_detail(fact: RowsFact) -> str:
    """Why a stage's rows cannot be judged, without the "insufficient data: " head."""
    cite = rules.cite(fact.rule)
    share = f"{100.0 * fact.excluded / fact.requests:.0f} %" if fact.requests else ""
    if fact.kind == "no_requests":
        return f"no requests were measured in this stage {cite}"
    if fact.kind == "lengths_missed":
        return (
            f"{fact.excluded} of {fact.requests} requests ({share}) missed the requested token "
            f"lengths and were excluded; {LENGTH_ADVICE} {cite}"
        )
    if fact.kind == "none_usable":
        return f"no request of this stage was usable {cite}"
    return (
        f"{fact.excluded} of {fact.requests} requests ({share}) excluded: "
        "their token counts missed the requested lengths"
    )


def rows_text(fact: RowsFact) -> str:
    """The stage reason for its rows: "insufficient data: …", or the rows it excluded."""
    if fact.kind == "some_excluded":
        return rows_detail(fact)
    return f"insufficient data: {rows_detail(fact)}"


def summary_text(fact: KneeSummaryFact) -> str:
    """The knee's summary: one or two sentences per finding, in the order a reader needs them."""
    if not fact.stages:
        return "no step stage to analyse"
    if len(fact.lacking_users) == fact.stages:
        first = "" if fact.first_lacking is None else rows_detail(fact.first_lacking)
        return f"no stage had enough usable data to judge: {first}."
    parts = []
    if fact.knee is not None:
        at = counted(fact.knee.target_users, "user")
        parts.append(f"knee at {at}: " + "; ".join(fact.knee.reasons[:2]) + ".")
    else:
        top = counted(fact.top_users or 0, "user")
        parts.append(f"no knee within the tested range (up to {top}).")
    if fact.red_line is not None:
        at = counted(fact.red_line.target_users, "user")
        parts.append(f"red line at {at}: " + "; ".join(fact.red_line.reasons[:2]) + ".")
    if fact.max_concurrency is not None:
        parts.append(f"max_concurrency {fact.max_concurrency}.")
    if fact.server_slots is not None:
        slots = fact.server_slots
        parts.append(
            f"the server's own metrics: requests waited while it ran {slots} at once, "
            f"so max_concurrency is at most {slots}."
        )
    elif fact.client_slots is not None:
        seen = fact.client_slots
        parts.append(
            f"seen from the client: requests waited while the server ran about {seen} at once, "
            f"so max_concurrency is at most {seen} (the server reports no running/waiting)."
        )
    elif not fact.server_reports_queue:
        parts.append("judged from the client side alone (the server reports no running/waiting).")
    if fact.fit_flat and fact.capacity is not None:
        parts.append(f"the fit over all stages: {capacity_words(*fact.capacity)}.")
    elif fact.fit_flat is not None:
        parts.append("the fit over all stages finds no plateau: no hard knee in range.")
    if fact.untrusted_users:
        parts.append(f"client-bound (untrusted) stages: {list(fact.untrusted_users)}.")
    if fact.noisy_users:
        parts.append(f"too noisy or short to judge (untrusted) stages: {list(fact.noisy_users)}.")
    if fact.lacking_users:
        parts.append(f"not judged (insufficient data): {list(fact.lacking_users)} users.")
    if fact.tail_source != "baseline":
        parts.append(
            f"tails are compared with {TAIL_SOURCES[fact.tail_source]} "
            f"{fact.tail_percentile.upper()}, lower than the baseline's (interference only adds "
            "latency)."
        )
    return " ".join(parts)


def fit_text(fit: KneeFit) -> str:
    """The rise-then-plateau fit over all stages in words (:mod:`analysis.knee.fit`)."""
    head = (
        f"throughput over all {fit.levels} levels rises {fit.rise:.2f}× one user's rate per user "
        f"up to ~{fit.capacity:.1f} users and {fit.plateau:.2f}× after (at most "
        f"{fit.plateau_high:.2f}× in 90 % of resamples)"
    )
    if fit.flat:
        words = capacity_words(fit.low, fit.high, fit.capacity)
        return f"{head}: {words} {rules.cite('knee_fit')}"
    return (
        f"{head}: no plateau (flat below {fit.flat_gain_ratio:g}×), so no hard knee in the "
        f"tested range {rules.cite('knee_fit')}"
    )


def confidence_text(fact: ConfidenceFact) -> str:
    """How sure the answer is, with the other answers the resamples gave."""
    if fact.same_pct is None:
        return "no confidence figure: no stage had per-window data"
    what = "the knee stage" if fact.knee_found else "the answer"
    others = ", ".join(
        f"{'none' if users is None else users} in {pct:.0f} %" for users, pct in fact.others
    )
    if fact.same_pct >= fact.confident_pct:
        word = "confident"
    elif fact.same_pct >= fact.unsure_pct:
        word = "fairly sure"
    else:
        word = "unsure: the data cannot tell, measure longer stages"
    return (
        f"max_concurrency {fact.max_concurrency}: {what} holds in {fact.same_pct:.0f} % of "
        f"{fact.resamples} resamples of the stages' time windows ({word})"
        + (f"; otherwise {others}" if others else "")
        + f" {rules.cite(fact.rule)}"
    )
