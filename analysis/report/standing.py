"""The words for what an answer stands on: a stage's missing rows, "cannot tell", a partial answer.

The facts are :class:`~analysis.model.Standing` (:mod:`analysis.advice.standing`) and the
not-judged stages' reasons (:class:`~analysis.model.FaultReason`, worded by
:mod:`analysis.report.stage_reasons`); this module only says them, for the screen, the stderr
line of exit 3, knee.json and the YAML.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from typing import TYPE_CHECKING

from analysis import rules
from analysis.knee.facts import ConfidenceFact, GainFact, TailFact
from analysis.knee.stage_verdict import signal_of
from analysis.model import CannotTell, KneeResult, RowCoverage, Standing
from analysis.report import yaml_text
from analysis.report.knee_words import RATE_UNITS, TAIL_SOURCES, lag_text
from analysis.report.stage_reasons import unjudged_detail
from loadknee_core.numeric import counted, fmt

if TYPE_CHECKING:
    from analysis.model import Reason

_CITE = rules.cite("missing_rows")

#: each "cannot tell" in a few words, for a line that only points at the run's own analysis
#: (``loadknee predict`` on such a run): ``loadknee analyze`` says it in full
CANNOT_TELL_SHORT: dict[CannotTell, str] = {
    "no_judged_stage": "no stage had enough usable data to judge",
    "unjudged_below": "the levels below its first judged one were not judged",
    "late_client": "its load generator ran late",
    "unsure": "its capacity moved with the noise",
    "tail_in_doubt": "a level's tail sat within the noise of the limit",
    "starved_server": "its server shared an overloaded machine and lost throughput there",
}

#: what to do about rows that are missing from a cut or incomplete requests.csv
RECOPY = (
    "copy the run directory again once the run has ended (or free the disk), or re-run the "
    "levels concerned"
)


def _users(users: Iterable[int]) -> str:
    return ", ".join(str(u) for u in users)


def _file_notes(coverage: RowCoverage) -> list[str]:
    notes = []
    if coverage.cut_files:
        notes.append(f"{', '.join(coverage.cut_files)} ended mid-row")
    if coverage.unlisted_stages:
        notes.append(
            f"requests.csv holds rows of stage(s) {_users(coverage.unlisted_stages)} that "
            "stages.csv does not list (stages.csv was cut): they are not judged"
        )
    return notes


#: each kind of missing rows in a few words, for a list of stages
_KIND_WORDS = {
    "not_measured": "requests.csv ends before them",
    "no_rows": "their rows are missing",
    "rows_cut": "requests.csv ends inside them",
    "empty_window": "an empty measured window",
}


def _and(users: list[int]) -> str:
    words = [str(u) for u in users]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def unjudged_text(standing: Standing) -> str:
    """The stages left out of a partial answer, why, and what to do to judge them."""
    faults = standing.coverage.faults
    parts = []
    for kind, words in _KIND_WORDS.items():
        users = sorted(f.target_users for f in faults if f.kind == kind)
        if users:
            parts.append(f"{_and(users)} users: {words}")
    faulted = {f.target_users for f in faults}
    other = [u for u in standing.unjudged if u not in faulted]
    if other:
        parts.append(f"{_and(other)} users: too few usable requests (--explain says why)")
    parts += _file_notes(standing.coverage)
    text = "the answer comes from the judged stages only; not judged: " + "; ".join(parts)
    if faulted:
        levels = ",".join(str(u) for u in sorted(faulted))
        text += f". To judge them, {RECOPY} (--levels {levels})"
    return f"{text} {_CITE}"


def first_unjudged(knee: KneeResult) -> Reason | None:
    """The reason of the lowest stage not judged (None when every stage was)."""
    lacking = (v for v in knee.stages if v.verdict == "insufficient_data" and v.reasons)
    return next((v.reasons[0] for v in lacking), None)


#: what to do about a load generator that ran late
QUIETER = (
    "re-run on a quieter machine (nothing else busy beside the load generator), spread the load "
    "generator over more processes (--processes N), or hold the stages longer (--stage-seconds)"
)


def late_text(standing: Standing) -> str:
    """Which stages' load generator was late, by how much, and what that did to the answer."""
    stages = [f"at {counted(f.users, 'user')} {lag_text(f)}" for f in standing.late]
    if standing.baseline_late is not None:
        stages.insert(0, f"at the baseline {lag_text(standing.baseline_late)}")
    past = standing.first_past
    where = (
        f"at or below {counted(past, 'user')}, the first level past the answer"
        if past is not None
        else "at or below the top level, which is the answer"
    )
    return (
        f"the load generator ran late {where} ({'; '.join(stages)}): those stages measured the "
        f"client, not the server, so the answer may be the client's; {QUIETER} "
        f"{rules.cite('late_client')}"
    )


def unsure_text(fact: ConfidenceFact) -> str:
    """Why the answer is the noise's pick: its share of the resamples against the others'."""
    answers = [(fact.max_concurrency, fact.same_pct or 0.0), *fact.others]
    shares = ", ".join(
        f"{'none' if users is None else users} in {pct:.0f} %"
        for users, pct in sorted(answers, key=lambda a: -a[1])
    )
    return (
        f"the capacity moves with the noise: resampling the stages' time windows "
        f"{fact.resamples} times gives {shares}, and the stages' own figures "
        f"{fact.max_concurrency}; hold the stages longer (--stage-seconds) or re-run on a "
        f"quieter machine {rules.cite(fact.rule)}"
    )


def in_doubt_text(standing: Standing, knee: KneeResult) -> str:
    """Why the answer sits on one level's noise: that level's tail against the limit, and the
    fit over all stages' capacity below it."""
    users = standing.in_doubt or 0
    verdict = next((v for v in knee.judged if v.target_users == users), None)
    tail = None if verdict is None else signal_of(verdict, "tail_departure")
    fact = None if tail is None else tail.fact
    its_tail = "its tail is"
    if isinstance(fact, TailFact) and fact.ratio is not None:
        reach = "" if fact.upper_ratio is None else f" (up to {fact.upper_ratio:.2f}×)"
        its_tail = (
            f"its {fact.percentile.upper()}, {fact.ratio:.2f}× {TAIL_SOURCES[fact.source]}"
            f"{reach}, is"
        )
        limit = f" of the {fact.threshold_ratio:g}× limit"
    else:
        limit = " of the limit"
    return (
        f"at {counted(users, 'user')} throughput had stopped growing while {its_tail} within "
        f"the noise{limit}: whether {counted(users, 'user')} is past the knee, and with it the "
        f"answer {knee.max_concurrency}, is the noise's call; the fit over all stages puts the "
        f"capacity at {fmt(knee.capacity)} (90 % interval {fmt(knee.capacity_low)}–"
        f"{fmt(knee.capacity_high)}) {rules.cite('knee_fit')}; take more baseline requests "
        f"(--baseline-requests), hold the stages longer (--stage-seconds) or re-run on a quieter "
        f"machine"
    )


def _whole(rate: float) -> str:
    """A throughput to the digits a fall needs: 427.9 → "428", 3.25 → "3.2"."""
    return f"{rate:,.0f}" if rate >= 100 else fmt(rate)


def starved_text(standing: Standing, knee: KneeResult) -> str:
    """Why the level that decided the answer measured the machine: the server's fall in
    throughput there, and the machine's load."""
    fact = standing.starved
    if fact is None:
        return ""
    verdict = next((v for v in knee.judged if v.target_users == fact.users), None)
    flat = None if verdict is None else signal_of(verdict, "throughput_flattening")
    gain = None if flat is None else flat.fact
    fell = "the server's throughput fell"
    if isinstance(gain, GainFact) and None not in (gain.prev_users, gain.prev_rate, gain.rate):
        unit = RATE_UNITS.get(gain.column, gain.column)
        before, after = (_whole(v or 0.0) for v in (gain.prev_rate, gain.rate))
        fell += (
            f" ({before} {unit} at {counted(int(gain.prev_users or 0), 'user')}, {after} at "
            f"{fact.users})"
        )
    return (
        f"at {counted(fact.users, 'user')} {fell} while this machine, which the server shares "
        f"({fact.server_host}), was overloaded (load {fact.host_load_1m:.1f} on "
        f"{counted(fact.host_cpus, 'core')}): a server short of slots, KV or compute stops "
        f"gaining, it does not lose, so the fall is the CPU the server waited for, and the "
        f"answer with it; run the load generator on another machine, or "
        f"stop what else runs here {rules.cite(fact.rule)}"
    )


def cannot_tell_text(standing: Standing, knee: KneeResult) -> str:
    """The "cannot tell: …" line: the reason and what to do (the first line on screen; exit 3)."""
    faults = standing.coverage.faults
    if standing.reason == "late_client":
        return "cannot tell: " + late_text(standing)
    if standing.reason == "unsure" and isinstance(knee.confidence, ConfidenceFact):
        return "cannot tell: " + unsure_text(knee.confidence)
    if standing.reason == "tail_in_doubt":
        return "cannot tell: " + in_doubt_text(standing, knee)
    if standing.reason == "starved_server":
        return "cannot tell: " + starved_text(standing, knee)
    if standing.reason == "unjudged_below":
        below = _users(standing.unjudged)
        text = (
            f"the lowest judged level already breaks a limit, and the levels below it ({below} "
            f"users) were not judged, so no level is known to be safe; {RECOPY} "
            f"(--levels {below.replace(', ', ',')})"
        )
    else:
        detail = unjudged_detail(first_unjudged(knee), cite=False)
        text = "no stage had enough usable data to judge" + (f": {detail}" if detail else "")
        if faults:
            text += f"; {RECOPY}"
    notes = _file_notes(standing.coverage)
    return "cannot tell: " + "; ".join([text, *notes]) + f" {_CITE}"


def yaml_note(standing: Standing, knee: KneeResult) -> list[str]:
    """Comment lines for the top of recommendations.yaml ([] when the answer is whole)."""
    if standing.kind == "answer":
        return []
    if standing.cannot_tell:
        head, text = "CANNOT TELL", cannot_tell_text(standing, knee)
        text = text.removeprefix("cannot tell: ")
    else:
        head, text = "PARTIAL", unjudged_text(standing)
    lines = textwrap.wrap(f"{head}: {yaml_text.comment(text)}", 94)
    return [f"# {lines[0]}", *(f"#   {line}" for line in lines[1:])]


def with_yaml_note(yaml: str, standing: Standing, knee: KneeResult) -> str:
    """``yaml`` (recommendations.yaml's text) with :func:`yaml_note` below its first line."""
    note = yaml_note(standing, knee)
    if not note:
        return yaml
    head, _, rest = yaml.partition("\n")
    return "\n".join([head, *note]) + "\n" + rest
