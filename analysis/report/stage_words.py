"""The stages' findings in words: where a run was cut short, and the baseline's warnings.

:mod:`analysis.stages` measures and finds (a :class:`~analysis.stages.run_cut.RunCut`: the
reason, the stage, the levels never run; a :class:`~analysis.model.BaselineNote`); the
screen, ``--explain``, record.md, the YAML comments, the cluster files and knee.json take their
words from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analysis import rules
from loadknee_core.numeric import counted, sig4

if TYPE_CHECKING:
    from analysis.model import BaselineNote
    from analysis.stages.run_cut import RunCut

#: how each cut is said
CUT_HOW = {
    "interrupted": "interrupted (Ctrl-C or SIGTERM)",
    "stopped": "stopped from the web UI",
    "killed": "killed before it could record its end",
}


def cut_text(cut: RunCut) -> str:
    """Where the run was cut, what never ran, and that the answer is provisional."""
    how = CUT_HOW.get(cut.reason, cut.reason)
    where = ""
    if cut.stage is not None:
        where = f" during stage {cut.stage}"
        if cut.users is not None:
            where += f" ({counted(cut.users, 'user')}"
            where += f", {cut.measured_s:.0f} s measured)" if cut.measured_s else ")"
    rest = ""
    if cut.levels_not_run:
        rest = "; levels never run: " + ", ".join(str(n) for n in cut.levels_not_run)
    return (
        f"the run was {how}{where}{rest}. The knee and the settings below come only from "
        f"the stages it reached: they are provisional {rules.cite('cut_short')}"
    )


def provisional_text(provisional: RunCut | str) -> str:
    """Why the settings are provisional ("" when final; a str is words read back)."""
    return provisional if isinstance(provisional, str) else cut_text(provisional)


#: how each figure of a spread warning is named
SPREAD_FIGURES = {
    "e2e_ms": "e2e latency (ms)",
    "s_per_1k": "seconds per 1k tokens",
    "tpot_ms": "decode time per token (ms; the requests' lengths vary)",
}
#: each warning on the baseline but the spread's, over the note's figures (``n``) and its rule
NOTES = {
    "no_baseline": "no stage served any request: there is no baseline to compare against",
    "first_stage": "no baseline stage: the first step stage ({n.users} users) stands in for it, "
    "and its throughput / {n.users} for the single-user rate",
    "few_requests": "baseline has only {n.requests} served requests (the method asks for "
    "{n.min_requests} or more): its P95 is rough {cite}",
}


def baseline_note_text(note: BaselineNote | str) -> str:
    """One warning on the baseline in words (a str is words read back from knee.json)."""
    if isinstance(note, str):
        return note
    if note.kind in NOTES:
        return NOTES[note.kind].format(n=note, cite=rules.cite(note.rule))
    p50, p95 = note.p50 or 0.0, note.p95 or 0.0
    return (
        f"baseline {SPREAD_FIGURES[note.figure or 'e2e_ms']} P95 {sig4(p95)} is "
        f"{p95 / p50:.2f}× its median {sig4(p50)} (limit {note.limit_ratio or 0.0:g}×): external "
        "interference (another process on the GPU, network jitter, log flushing); clean up "
        "before trusting the sweep"
    )
