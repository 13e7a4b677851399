"""Whether a run was cut short (Ctrl-C, SIGTERM, a killed process), and where.

Why: a run stopped in the middle of a stage looks like a complete, shorter sweep once it is
summarised; the knee and the settings from it then describe only the levels that were reached.
The Locust side records the facts (``run.json``'s ``stop_reason`` and ``end_unix_s``, the partial
stage's ``stop_reason`` in ``stages.csv``); this module reads them into a :class:`RunCut`, so the
CLI can print it (:func:`analysis.report.stage_words.cut_text`) and the recommendations can be
marked provisional.

* ``stop_reason`` ``interrupted`` (signal) or ``stopped`` (web UI stop): cut by the user;
* a ``start_unix_s`` and an ``end_unix_s`` still null in ``run.json`` (the plugin writes null at
  the start): the process died before it could write its end; a missing key says nothing;
* any other reason (the sweep ran out, the red line, the time limit): not cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast

import pandas as pd

from analysis.stages.levels import level_rows

#: how a run was cut: a signal, the web UI's stop, or a process that died before its end
CutReason = Literal["interrupted", "stopped", "killed"]

CUT_REASONS = frozenset({"interrupted", "stopped"})


@dataclass(frozen=True)
class RunCut:
    """Where a run was cut: the stage running then, its users, and the levels never run."""

    reason: CutReason
    stage: int | None
    users: int | None
    measured_s: float | None  # how long the cut stage's measured window lasted
    levels_not_run: tuple[int, ...]


def run_cut(run_info: dict[str, Any], stages: pd.DataFrame) -> RunCut | None:
    """The cut, or None for a run that ended by its own rules."""
    reason = run_info.get("stop_reason")
    if "start_unix_s" in run_info and "end_unix_s" in run_info and run_info["end_unix_s"] is None:
        # the plugin writes an explicit null at the start and the time at the end; a run.json
        # from elsewhere (an import, a hand-made fixture) without the key says nothing of a cut
        reason = "killed"
    elif reason not in CUT_REASONS:
        return None
    stage = users = measured = None
    reached: set[int] = set()
    if not stages.empty:
        last = stages.iloc[-1]
        stage, users = int(last["stage"]), int(last["target_users"])
        span = float(last["measure_end_unix_s"]) - float(last["warmup_end_unix_s"])
        measured = span if span == span and span > 0 else None  # NaN-safe
        steps = level_rows(stages)
        reached = {int(u) for u in steps["target_users"]}
    planned = run_info.get("levels") or []
    not_run = tuple(int(n) for n in planned if int(n) not in reached and n != users)
    return RunCut(cast(CutReason, reason), stage, users, measured, not_run)
