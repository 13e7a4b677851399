"""Each request row's outcome class and whether it lies in a measured phase, found once a run.

Why: the record table's counts, its window rates, the stages' intervals and the client-side
queue all ask of every row "ok, length mismatch, error or cancelled?" and "measured?". Each used
to compare the outcome and phase strings itself; on a million rows that was four factorisations
of one text column and three of another (a tenth of a second each, issue 43). :func:`run_classes`
answers both once per run; every reader takes arrays from it.

The classes (:data:`CLASSES`, the ``cls`` column of
:func:`analysis.stages.summary.measured_requests`):

* ``cancelled`` — the outcome is one of :data:`~loadknee_core.contract.NOT_JUDGED_OUTCOMES`
  (our own stop cut the request): it says nothing about the server and no figure counts it;
* ``ok`` — outcome ``ok`` and its length not mismatched;
* ``length_mismatch`` — outcome ``length_mismatch``, or ``length_ok`` 0 (counted, not timed);
* ``error`` — every other outcome, a missing one included.

A cancelled row stays cancelled whatever its ``length_ok`` says.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from loadknee_core.contract import NOT_JUDGED_OUTCOMES

if TYPE_CHECKING:
    from analysis.inputs.load import Run

#: the phases whose rows are measured: the step stages' and the baseline stage's windows
MEASURED_PHASES: tuple[str, ...] = ("measure", "baseline")
#: the outcome classes, in code order (:attr:`RowClasses.code` indexes this)
CLASSES: tuple[str, ...] = ("cancelled", "ok", "length_mismatch", "error")
CANCELLED, OK, MISMATCH, ERROR = range(len(CLASSES))


def text_flags(values: pd.Series, *name_sets: Sequence[str]) -> list[np.ndarray]:
    """Per set of names, ``values.isin(names)`` as a bool array (missing: False), comparing
    each distinct value once instead of every row (a million string comparisons each)."""
    codes, distinct = pd.factorize(values)  # a missing value gets code -1
    index = pd.Index(distinct)
    return [np.append(index.isin(names), False)[codes] for names in name_sets]


def class_codes(outcome: pd.Series, length_ok: pd.Series | None = None) -> np.ndarray:
    """Per row, its place in :data:`CLASSES` (int8) from its outcome and ``length_ok``."""
    names = (NOT_JUDGED_OUTCOMES, ("ok",), ("length_mismatch",))
    cancelled, ok, mismatch = text_flags(outcome, *names)
    if length_ok is not None:  # NaN (no length asked for) is not 0
        mismatch |= (length_ok == 0).to_numpy(dtype=bool, na_value=False)
    code = np.full(len(cancelled), ERROR, dtype=np.int8)
    code[mismatch] = MISMATCH
    code[ok & ~mismatch] = OK
    code[cancelled] = CANCELLED
    return code


@dataclass(frozen=True, eq=False)
class RowClasses:
    """Per row of one requests frame, in row order: its class code and whether it is measured."""

    code: np.ndarray  # int8, a place in CLASSES
    measured: np.ndarray  # bool: phase in MEASURED_PHASES (all False without a phase column)

    @classmethod
    def of(
        cls, requests: pd.DataFrame, measured_phases: Sequence[str] = MEASURED_PHASES
    ) -> RowClasses:
        """The classes of ``requests`` (needs ``outcome``; ``length_ok`` and ``phase`` when
        present)."""
        code = class_codes(requests["outcome"], requests.get("length_ok"))
        if "phase" in requests:
            (measured,) = text_flags(requests["phase"], tuple(measured_phases))
        else:
            measured = np.zeros(len(requests), dtype=bool)
        return cls(code, measured)

    @property
    def ok(self) -> np.ndarray:
        """Rows of class ``ok``."""
        return self.code == OK

    @property
    def judged(self) -> np.ndarray:
        """Rows that say something about the server: every class but ``cancelled``."""
        return self.code != CANCELLED

    def take(self, rows: np.ndarray) -> RowClasses:
        """The classes of the rows ``rows`` selects (a bool mask or positions), in that order."""
        return RowClasses(self.code[rows], self.measured[rows])


_BY_RUN: weakref.WeakKeyDictionary[Run, RowClasses] = weakref.WeakKeyDictionary()


def run_classes(run: Run) -> RowClasses:
    """:meth:`RowClasses.of` the run's requests, computed on the first call for this run and
    kept while the run lives (a :class:`~analysis.inputs.load.Run` is read once and not changed
    after; ``dataclasses.replace`` makes a new one, with classes of its own)."""
    found = _BY_RUN.get(run)
    if found is None or len(found.code) != len(run.requests):
        found = RowClasses.of(run.requests)
        _BY_RUN[run] = found
    return found
