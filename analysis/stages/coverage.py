"""Whether the recorded rows cover every stage stages.csv lists, and which stages they do not.

Why: stages.csv and requests.csv are written side by side, but a killed sweep, a full disk or a
copy taken while the run was still going can leave requests.csv shorter than stages.csv says.
Summarised as they stand, the stages past the cut read "0 requests" and the stage the cut went
through reads a throughput too low (its window counts the full time, its rows only part of it):
the first made "the tested range" reach levels with no data behind them, the second can look
like a flattening. A stage whose rows disagree with its window is therefore never judged and
never the answer (:mod:`analysis.advice.standing` decides what the answer still is).

Rules, for each level stage (not the baseline) with window ``[w0, w1]`` (``warmup_end_unix_s``,
``measure_end_unix_s``), ``T`` the latest ``end_unix_s`` of any recorded request and ``margin``
the longer of :data:`FLUSH_S` and the longest request the stage recorded (a request running when
the window closed ends within about that much):

* ``empty_window`` — ``w1 <= w0``: no measured window to judge;
* no measured row: ``not_measured`` when ``w0 >= T`` (the rows end before its window opened:
  the file was cut earlier), else ``no_rows`` (the file goes on past it: its rows are missing),
  except where the stage's requests are recorded and complete (as below): then no request both
  started and ended inside its window (requests that outlast a short stage), no row is missing,
  and the stage is judged as one with too few usable requests;
* ``rows_cut`` — rows, but not all of them: not ``T >= w1 + margin``, not every user's request
  running when the window closed recorded (closed loop: one per user), not a count-based window
  (``request_count``: it closes when its last measured request ends) with ``T >= w1``; and either
  a later stage was started (the file should go on past this one), or the file's last line was
  cut (``cut_files``) and ``T < w1 - margin``: the rows stop inside the last stage's window. The
  last stage needs that evidence of a cut: sparse open-loop arrivals, or a run stopped in the
  stage (its window ends at the stop), also leave its last seconds without a completion. So a
  cut last line alone, at the end of a run, changes nothing; a requests.csv cut exactly at a line
  boundary inside the last stage is not seen (its rates read low: a knee, if any, too early).

Facts only: the words are :mod:`analysis.report.standing`'s.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from analysis.model import RowCoverage, RowFault, StageFault
from analysis.stages.levels import level_mask

#: writers flush whole rows at least once a second: a row can lag its request's end this much
FLUSH_S = 1.0


def _floats(frame: pd.DataFrame, column: str) -> np.ndarray:
    if column not in frame:
        return np.full(len(frame), np.nan)
    return frame[column].to_numpy(dtype=float, na_value=np.nan)


def _per_stage_max(stage: np.ndarray, values: np.ndarray) -> dict[int, float]:
    keep = ~np.isnan(stage) & ~np.isnan(values)
    if not keep.any():
        return {}
    series = pd.Series(values[keep]).groupby(stage[keep].astype(int)).max()
    return dict(
        zip(series.index.to_numpy(int).tolist(), series.to_numpy(float).tolist(), strict=True)
    )


def _in_flight(stages: pd.DataFrame, requests: pd.DataFrame) -> dict[int, int]:
    """Per stage: its recorded requests still running when its measured window closed."""
    close = dict(zip(_floats(stages, "stage"), _floats(stages, "measure_end_unix_s"), strict=True))
    stage = _floats(requests, "stage")
    w1 = pd.Series(stage).map(close).to_numpy(dtype=float, na_value=np.nan)
    running = (_floats(requests, "start_unix_s") <= w1) & (_floats(requests, "end_unix_s") > w1)
    found, counts = np.unique(stage[running].astype(int), return_counts=True)
    return dict(zip(found.tolist(), counts.tolist(), strict=True))


def row_coverage(
    stages: pd.DataFrame,
    requests: pd.DataFrame,
    measured: pd.DataFrame,
    *,
    cut_files: Iterable[str] = (),
) -> RowCoverage:
    """Which level stages the recorded rows do not cover (pure)."""
    cut = tuple(cut_files)
    ends = _floats(requests, "end_unix_s")
    rows_end = float(np.nanmax(ends)) if len(ends) and not np.isnan(ends).all() else None
    req_stage = _floats(requests, "stage")
    longest_s = _per_stage_max(req_stage, _floats(requests, "e2e_ms") / 1000.0)
    counts = measured["stage"].dropna().astype(int).value_counts().to_dict()
    listed = {int(s) for s in stages["stage"].dropna()}
    found, found_counts = np.unique(req_stage[~np.isnan(req_stage)], return_counts=True)
    recorded_in = dict(zip(found.astype(int).tolist(), found_counts.tolist(), strict=True))
    recorded = set(recorded_in)  # not per row
    unlisted = tuple(sorted(recorded - listed))
    in_flight = _in_flight(stages, requests)
    starts = _floats(stages, "start_unix_s")
    last_start = float(np.nanmax(starts)) if len(starts) and not np.isnan(starts).all() else None
    opens = _floats(stages, "warmup_end_unix_s")
    opens = np.where(np.isnan(opens), starts, opens)
    closes = _floats(stages, "measure_end_unix_s")
    numbers, users = _floats(stages, "stage"), _floats(stages, "target_users")
    # without a kind column no stage is known to be a level, so none is checked
    levels = level_mask(stages) if "kind" in stages else np.zeros(len(stages), dtype=bool)
    stops = stages["stop_reason"].tolist() if "stop_reason" in stages else [None] * len(stages)
    faults: list[StageFault] = []
    for i in np.flatnonzero(levels).tolist():
        stage = int(numbers[i])
        w0, w1 = float(opens[i]), float(closes[i])
        window = None if np.isnan(w0) or np.isnan(w1) else w1 - w0
        rows = int(counts.get(stage, 0))
        fault: RowFault | None = None
        margin = max(FLUSH_S, longest_s.get(stage, 0.0))
        # every request running at the window's close recorded (see the module docstring)
        complete = rows_end is not None and (
            rows_end >= w1 + margin
            or in_flight.get(stage, 0) >= int(users[i])
            or (stops[i] == "request_count" and rows_end >= w1)
        )
        if window is not None and window <= 0:
            fault = "empty_window"
        elif rows == 0:
            opened_after = rows_end is None or (window is not None and w0 >= rows_end)
            if opened_after:
                fault = "not_measured"
            elif not (recorded_in.get(stage, 0) > 0 and complete):  # else: they outlasted it
                fault = "no_rows"
        elif window is not None and rows_end is not None:
            later = last_start is not None and float(starts[i]) < last_start
            if not complete and (later or (bool(cut) and rows_end < w1 - margin)):
                fault = "rows_cut"
        if fault is not None:
            faults.append(StageFault(stage, int(users[i]), fault, rows, window))
    return RowCoverage(
        faults=tuple(sorted(faults, key=lambda f: f.stage)),
        rows_end_unix_s=rows_end,
        cut_files=cut,
        unlisted_stages=unlisted,
    )
