"""A stage's reasons in words: each :data:`analysis.model.Reason` record, worded once.

The knee (:mod:`analysis.knee.find`) gives a stage's verdict its reasons as records: the signals
behind it (worded by :mod:`analysis.report.knee_words`), the stage's rows
(:class:`~analysis.stages.data_check.RowsFact`), the client's caveat, the gauges' disagreement,
"no signal", or why a stage whose rows disagree with stages.csv was not judged
(:class:`~analysis.model.FaultReason`). The screen, ``--explain``, record.md, report.html,
knee.json's ``reasons`` and the live answer all take their words from :func:`reasons_text`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analysis import rules
from analysis.diagnosis.facts import FailureMix
from analysis.knee.facts import ClientBoundFact, GaugeCheckFact, NoSignalFact
from analysis.model import FaultReason, Signal, StageVerdict
from analysis.report.diagnosis_words import mix_text
from analysis.report.knee_words import NO_SIGNAL, fact_text, signal_text, untrusted_client_text
from analysis.stages.data_check import RowsFact
from loadknee_core.numeric import counted

if TYPE_CHECKING:
    from analysis.model import Reason

#: the head of every "not judged" reason
INSUFFICIENT = "insufficient data: "

#: what a stage whose rows mostly missed the requested lengths should change
LENGTH_ADVICE = (
    "the server ignores the requested lengths (it stops at its own end-of-sequence or caps "
    "max_tokens, or counts the prompt differently): let it honour ignore_eos/min_tokens (vLLM, "
    "SGLang and llama.cpp do), raise its max_tokens / context cap, or replay a prompt log "
    "(--llm-prompt-log) where lengths are not pinned"
)


#: a stage's rows in words, by their kind, over the fact's figures (``f``) and the share left out
ROWS_WORDS = {
    "no_requests": "no requests were measured in this stage",
    "lengths_missed": "{f.excluded} of {f.requests} requests ({share}) missed the requested "
    "token lengths and were excluded; " + LENGTH_ADVICE,
    "none_usable": "no request of this stage was usable",
    "some_excluded": "{f.excluded} of {f.requests} requests ({share}) excluded: their token "
    "counts missed the requested lengths",
}


def _rows_words(fact: RowsFact) -> str:
    share = f"{100.0 * fact.excluded / fact.requests:.0f} %" if fact.requests else ""
    return ROWS_WORDS[fact.kind].format(f=fact, share=share)


def rows_detail(fact: RowsFact) -> str:
    """Why a stage's rows cannot be judged, without the "insufficient data: " head."""
    if fact.kind == "some_excluded":
        return _rows_words(fact)
    return f"{_rows_words(fact)} {rules.cite(fact.rule)}"


def rows_text(fact: RowsFact) -> str:
    """The stage reason for its rows: "insufficient data: …", or the rows it excluded."""
    if fact.kind == "some_excluded":
        return rows_detail(fact)
    return f"{INSUFFICIENT}{rows_detail(fact)}"


def _s(value: float) -> str:
    return f"{value:.1f} s"


def _fault_words(reason: FaultReason) -> str:
    fault, end, opened = reason.fault, reason.rows_end_unix_s, reason.opened_unix_s
    window = "no" if fault.window_s is None else _s(fault.window_s)
    if fault.kind == "empty_window":
        return f"empty measured window: stages.csv gives this stage {window} of measured time"
    if fault.kind == "not_measured":
        early = (
            f" {_s(opened - end)} before" if end is not None and opened is not None else " before"
        )
        return (
            f"not measured: requests.csv ends{early} this stage's measured window opened "
            f"(the file was cut: a killed sweep, a full disk or a copy in progress)"
        )
    if fault.kind == "no_rows":
        return (
            f"no rows: stages.csv gives this stage a {window} measured window, yet requests.csv "
            "holds no measured request of it while its rows go on past it (rows lost or deleted)"
        )
    into = ""
    if end is not None and opened is not None and fault.window_s is not None:
        into = f" {_s(end - opened)} into its {window} window or just after it"
    return (
        f"rows cut: requests.csv ends{into}, while its requests still ran: its "
        f"{counted(fault.rows, 'measured request')} undercount it and its rates would "
        "read low"
    )


def unjudged_detail(reason: Reason | None, *, cite: bool = True) -> str:
    """Why a stage was not judged, without the "insufficient data: " head (``cite=False``:
    without the rule's citation either); "" for no reason."""
    if isinstance(reason, RowsFact):
        return rows_detail(reason) if cite else _rows_words(reason)
    if isinstance(reason, FaultReason):
        words = _fault_words(reason)
        return f"{words} {rules.cite('missing_rows')}" if cite else words
    if isinstance(reason, str):  # read back from knee.json
        detail = reason.removeprefix(INSUFFICIENT)
        return detail if cite else detail.split(" (" + rules.CITE_PREFIX, 1)[0]
    return ""


def reason_text(reason: Reason) -> str:
    """One reason in words."""
    match reason:
        case Signal():
            return signal_text(reason)
        case RowsFact():
            return rows_text(reason)
        case FaultReason():
            return f"{INSUFFICIENT}{unjudged_detail(reason)}"
        case ClientBoundFact():
            return untrusted_client_text(reason.client)
        case GaugeCheckFact():
            return fact_text(reason)
        case NoSignalFact():
            return NO_SIGNAL
        case FailureMix():
            return f"failures: {mix_text(reason)}"
        case str():
            return reason


def reasons_text(verdict: StageVerdict) -> tuple[str, ...]:
    """The stage's reasons in words, in order, each said once."""
    return tuple(dict.fromkeys(reason_text(r) for r in verdict.reasons))
