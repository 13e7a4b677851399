"""Name each stage's failures: the share per outcome and HTTP status, and the commonest messages.

Why: "success 78.1 % (150 of 685 failed)" says that something failed, not what; a rejection
storm (HTTP 429/503), a server bug (500, resets, cut streams, error objects) and a stall
(timeouts) call for different fixes, and only the kind tells the bottleneck apart from queueing.

:func:`failure_mixes` reads the measured rows (``measured_requests``: a ``cls`` column) and
returns, per stage with at least one failure, a :class:`FailureMix`: counts by kind, most first
("HTTP 503", "timeouts", "connection resets", ...), the top :data:`TOP_MESSAGES` error messages,
and three families used by the diagnosis: **overload** (HTTP 429 / 503: the server turned
requests away), **stalls** (timeouts) and **server errors** (everything else).
:func:`name_failures` puts the text into each verdict (its ``failures`` field and a reason).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace

import pandas as pd

from analysis.model import KneeResult

TOP_MESSAGES = 3
OVERLOAD_STATUSES = frozenset({429, 503})

#: how each non-HTTP outcome is named in the text
OUTCOME_NAMES: dict[str, str] = {
    "timeout": "timeouts",
    "connect_error": "connection errors/resets",
    "incomplete": "cut streams",
    "malformed": "malformed responses",
    "stream_error": "error objects",
    "empty_response": "empty responses",
    "client_error": "client errors",
}


@dataclass(frozen=True)
class FailureMix:
    """One stage's failures: ``kinds`` and ``messages`` as (name, count), most first."""

    requests: int  # measured rows of the stage, every outcome
    kinds: tuple[tuple[str, int], ...]
    messages: tuple[tuple[str, int], ...]
    overload: int  # HTTP 429 / 503
    stalls: int  # timeouts
    server_errors: int  # other HTTP errors, resets, cut streams, malformed, error objects

    @property
    def failed(self) -> int:
        return self.overload + self.stalls + self.server_errors

    def pct(self, count: int) -> float:
        return 100.0 * count / self.requests if self.requests else 0.0

    @property
    def text(self) -> str:
        """``22 % HTTP 503 (150); 3 % timeouts (20); top message: "queue full" ×150``."""
        parts = [f"{_pct_text(self.pct(n))} {name} ({n})" for name, n in self.kinds]
        text = "; ".join(parts)
        if self.messages:
            top = ", ".join(f'"{msg}" ×{n}' for msg, n in self.messages)
            text += f"; top messages: {top}"
        return text

    @property
    def family(self) -> str:
        """The largest family: ``overload``, ``stalls`` or ``server_errors``."""
        families = {"overload": self.overload, "stalls": self.stalls}
        families["server_errors"] = self.server_errors
        return max(families, key=lambda name: families[name])


def _pct_text(pct: float) -> str:
    return f"{pct:.0f} %" if pct >= 1 else f"{pct:.1g} %"


def _status(status: object) -> int | None:
    try:
        code = float(str(status))
    except ValueError:
        return None
    return int(code) if code == code else None  # NaN: no status


def _kind(outcome: str, status: object) -> str:
    if outcome == "http_error":
        code = _status(status)
        return f"HTTP {code}" if code is not None else "HTTP errors"
    return OUTCOME_NAMES.get(outcome, outcome)


def _family(outcome: str, status: object) -> str:
    if outcome == "timeout":
        return "stalls"
    if outcome == "http_error" and _status(status) in OVERLOAD_STATUSES:
        return "overload"
    return "server_errors"


def _short(message: object) -> str:
    text = (
        ""
        if message is None or (isinstance(message, float) and message != message)
        else str(message)
    )
    text = " ".join(text.split())
    return text[:77] + "..." if len(text) > 80 else text


def failure_mixes(measured: pd.DataFrame) -> dict[int, FailureMix]:
    """Per stage with failures, its :class:`FailureMix` (rows need ``stage``, ``outcome``,
    ``http_status``, ``error`` and the ``cls`` column of :func:`measured_requests`)."""
    out: dict[int, FailureMix] = {}
    if measured.empty:
        return out
    # the failed rows cut out once, then grouped: not every stage's rows copied to find them
    sizes = measured.groupby("stage").size()
    for stage, failed in measured[measured["cls"] == "error"].groupby("stage"):
        pairs = list(zip(failed["outcome"].astype(str), failed["http_status"], strict=True))
        kinds = Counter(_kind(o, s) for o, s in pairs)
        families = Counter(_family(o, s) for o, s in pairs)
        errors = failed["error"] if "error" in failed else pd.Series([], dtype=object)
        messages = Counter(m for m in (_short(e) for e in errors) if m)
        out[int(float(str(stage)))] = FailureMix(
            requests=int(sizes[stage]),
            kinds=tuple(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
            messages=tuple(messages.most_common(TOP_MESSAGES)),
            overload=families["overload"],
            stalls=families["stalls"],
            server_errors=families["server_errors"],
        )
    return out


def name_failures(knee: KneeResult, mixes: Mapping[int, FailureMix]) -> KneeResult:
    """``knee`` with each failing stage's mix in ``failures`` and as its last reason (the mix
    itself: :mod:`analysis.report.stage_reasons` words it)."""
    stages = []
    for verdict in knee.stages:
        mix = mixes.get(verdict.stage)
        if mix is None:
            stages.append(verdict)
            continue
        stages.append(replace(verdict, failures=mix.text, reasons=(*verdict.reasons, mix)))
    return replace(knee, stages=tuple(stages))
