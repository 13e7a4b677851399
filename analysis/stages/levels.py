"""Which stages are concurrency levels of the sweep: the one selector the whole analysis uses.

A level is a grid ``step`` or a ``refine`` stage between two
(:data:`~loadknee_core.contract.LEVEL_KINDS`), the stages the knee, the SLOs, the fit and the
plots are judged on; the ``baseline`` is the yardstick they are compared with, never a level. A
frame without a ``kind`` column (a hand-made record table) is all levels.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from loadknee_core.contract import LEVEL_KINDS


def level_mask(frame: pd.DataFrame) -> np.ndarray:
    """Per row of a stages or record table, whether it is a level (a boolean array)."""
    if "kind" not in frame:
        return np.ones(len(frame), dtype=bool)
    return frame["kind"].isin(LEVEL_KINDS).to_numpy(dtype=bool)


def level_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of a stages or record table that are levels, in the frame's order."""
    return frame[level_mask(frame)] if "kind" in frame else frame
