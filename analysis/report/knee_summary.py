"""The knee's answer in words: its summary, the fit over all stages and its confidence, each
written from its fact (:mod:`analysis.knee.facts`, :class:`analysis.knee.fit.KneeFit`); the
signals' words are :mod:`analysis.report.knee_words`', a stage's reasons
:mod:`analysis.report.stage_reasons`'. A ``str`` in their place is words read back from knee.json.
"""

from __future__ import annotations

from analysis import rules
from analysis.knee.facts import ConfidenceFact, KneeSummaryFact
from analysis.knee.fit import KneeFit, whole
from analysis.model import KneeResult
from analysis.report.answer_view import unresampled_words
from analysis.report.knee_words import TAIL_SOURCES, capacity_words
from analysis.report.stage_reasons import reasons_text, unjudged_detail
from loadknee_core.knee_params import KneeOverride
from loadknee_core.numeric import counted


def summary_text(fact: KneeSummaryFact) -> str:
    """The knee's summary: one or two sentences per finding, in the order a reader needs them."""
    if not fact.stages:
        return "no step stage to analyse"
    if len(fact.lacking_users) == fact.stages:
        return f"no stage had enough usable data to judge: {unjudged_detail(fact.first_lacking)}."
    parts = []
    if fact.knee is not None:
        at = counted(fact.knee.target_users, "user")
        parts.append(
            f"knee stage at {at}, the first past the capacity: "
            + "; ".join(reasons_text(fact.knee)[:2])
            + "."
        )
    else:
        top = counted(fact.top_users or 0, "user")
        parts.append(f"no knee within the tested range (up to {top}).")
    if fact.red_line is not None:
        at = counted(fact.red_line.target_users, "user")
        parts.append(f"red line at {at}: " + "; ".join(reasons_text(fact.red_line)[:2]) + ".")
    if fact.max_concurrency is not None:
        parts.append(f"capacity {fact.max_concurrency}.")
    if fact.server_slots is not None:
        slots = fact.server_slots
        parts.append(
            f"the server's own metrics: requests waited while it ran {slots} at once, "
            f"so the capacity is at most {slots}."
        )
    elif fact.client_slots is not None:
        seen = fact.client_slots
        parts.append(
            f"seen from the client: requests waited while the server ran about {seen} at once, "
            f"so the capacity is at most {seen} (the server reports no running/waiting)."
        )
    elif not fact.server_reports_queue:
        parts.append("judged from the client side alone (the server reports no running/waiting).")
    if fact.fit_flat and fact.capacity is not None:
        words = capacity_words(*fact.capacity, named=False)
        low, high, mid = (whole(v) for v in fact.capacity)
        held = fact.max_concurrency is None or min(low, mid) <= fact.max_concurrency <= max(
            high, mid
        )
        fit = "the fit over all stages" + ("" if held else " disagrees: it")
        parts.append(f"{fit} puts the capacity at {words}.")
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
    text = " ".join(parts)
    if fact.missing_rows_users:
        text += (
            f" not judged (rows missing from requests.csv): {list(fact.missing_rows_users)} users."
        )
    return text


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
    if fact.unresampled:
        return (
            f"capacity {fact.max_concurrency}: {unresampled_words(fact.unresampled)} (too few "
            "time windows one request long), so they hold their figures in every resample and "
            "a share of agreeing resamples would measure no noise; hold each stage longer "
            f"{rules.cite(fact.rule)}"
        )
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
        f"capacity {fact.max_concurrency}: {what} holds in {fact.same_pct:.0f} % of "
        f"{fact.resamples} resamples of the stages' time windows ({word})"
        + (f"; otherwise {others}" if others else "")
        + f" {rules.cite(fact.rule)}"
    )


def override_note(overrides: tuple[KneeOverride, ...]) -> str | None:
    """The thresholds given on the command line that differ from the run's, in flag words
    (None when none does)."""
    if not overrides:
        return None
    changed = [f"{o.flag} {o.used} (the run's: {o.recorded})" for o in overrides]
    return "judged with " + ", ".join(changed)


def summary_words(knee: KneeResult) -> str:
    """The knee's summary (its words as read back, or written from its fact)."""
    return knee.summary if isinstance(knee.summary, str) else summary_text(knee.summary)


def confidence_words(knee: KneeResult) -> str:
    """The knee's confidence in words ("" when it was not resampled)."""
    fact = knee.confidence
    return fact if isinstance(fact, str) else confidence_text(fact)


def fit_words(knee: KneeResult) -> str:
    """The fit over all stages in words ("" when there was no fit)."""
    fit = knee.capacity_text
    return fit if isinstance(fit, str) else fit_text(fit)
