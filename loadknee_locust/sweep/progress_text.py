"""The words of the sweep's progress lines and of its closing line (pure: tested table-driven).

The shape (:mod:`loadknee_locust.plugin.shape`) gathers the numbers and logs the text these
functions make; ``loadknee run`` shows it as ``[loadknee] …``. Why a module of its own: the lines
read "1 requests", "21/20 requests of this stage" (every request of the stage, warm-up included,
over the measured count it waited for) and "stopped (duration) with 0 grid level(s) skipped []";
the words are now made in one place, from plain numbers, and a count is always said with its
noun in the right number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from loadknee_core.contract import StopReason
from loadknee_core.numeric import counted  # stdlib only: the one plural rule of the screen

#: why the sweep ended, in words (:data:`loadknee_core.contract.STOP_REASONS` gives the keys)
STOP_WORDS: Final[dict[StopReason, str]] = {
    "duration": "the plan ran to its last level",
    "request_count": "the plan ran to its last level",
    "precise": "the plan ran to its last level",
    "imprecise": "the plan ran to its last level (its last stage held to its longest, "
    "short of the asked precision)",
    "red_line": "a stage crossed the red line (errors or P95 latency)",
    "knee_confirmed": "the knee was found, refined and confirmed by the level above it",
    "time_limit": "the run's time limit was reached",
    "stopped": "stopped from the web UI",
    "interrupted": "interrupted (Ctrl-C or a signal): the last stage is partial",
}


def users_text(users: Sequence[int]) -> str:
    """Levels as users: "32 users", "1 user", "24, 32 users"."""
    if len(users) == 1:
        return counted(users[0], "user")
    return ", ".join(str(u) for u in users) + " users"


def count_window_text(measured: int, asked: int, eta_s: float | None) -> str:
    """How far a count-based window is: "12 of 20 measured; ~8 s left in this stage", then,
    since requests in flight when the count is reached still count, "21 measured (20 asked)"."""
    if measured < asked:
        got = f"{measured} of {asked} measured"
    else:
        got = f"{measured} measured ({asked} asked)"
    rest = "time left unknown" if eta_s is None else f"~{eta_s:.0f} s left in this stage"
    return f"{got}; {rest}"


@dataclass(frozen=True)
class ProgressFacts:
    """One progress line's numbers: the stage's label, its users, the phase, its completed
    requests (any phase) and measured errors, the time-left text; whether and why the sweep
    finished."""

    label: str
    users: int
    phase: str
    requests: int
    errors: int
    left: str
    finished: bool = False
    stop_reason: StopReason | None = None  # why it finished


def progress_text(facts: ProgressFacts) -> str:
    """ "stage 2/6 (2 users) measure | 24 requests, 0 errors | 25 s left"; once finished,
    "… finished | … | the plan ran to its last level"."""
    phase = "finished" if facts.finished else facts.phase
    counts = f"{counted(facts.requests, 'request')}, {counted(facts.errors, 'error')}"
    text = f"{facts.label} ({counted(facts.users, 'user')}) {phase} | {counts} | {facts.left}"
    if facts.finished and facts.stop_reason is not None:
        text += f" | {STOP_WORDS[facts.stop_reason]}"
    return text


def stop_text(
    reason: StopReason | None,
    skipped_levels: Sequence[int],
    refine_stages: int,
    level_s: float,
    saved_s: float,
) -> str:
    """The adaptive sweep's closing line: why it ended, what it skipped or added against the
    grid and what that cost or saved (``saved_s`` < 0: it cost), at ``level_s`` per level."""
    why = STOP_WORDS[reason] if reason is not None else "the sweep ended"
    changes = []
    if skipped_levels:
        grid = counted(len(skipped_levels), "grid level")
        changes.append(f"{grid} skipped ({users_text(skipped_levels)})")
    if refine_stages:
        changes.append(f"{counted(refine_stages, 'refine stage')} added")
    if not changes:
        return f"sweep over: {why}; every grid level ran, none added ({level_s:.0f} s per level)"
    if round(saved_s) == 0:
        cost = "about as long as the full grid, for a finer answer"
    elif saved_s > 0:
        cost = f"about {saved_s:.0f} s saved against the full grid"
    else:
        cost = f"about {-saved_s:.0f} s more than the full grid, for a finer answer"
    return f"sweep over: {why}; {' and '.join(changes)}: {cost} ({level_s:.0f} s per level)"
