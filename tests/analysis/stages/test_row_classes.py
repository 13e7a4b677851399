"""Each row's class and measured flag, found once (analysis.stages.row_classes), against the
string comparisons they replace."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.inputs.load import Run
from analysis.stages import row_classes as rc


@pytest.mark.parametrize(
    "values",
    [
        ["ok", "timeout", "ok", None, "cancelled", np.nan, "length_mismatch", "http_error"],
        ["ok"] * 5,
        [],
        [None, None],
    ],
)
def test_text_flags_are_isin(values: list) -> None:
    """(Was test_array_intervals' test_outcome_flags_are_isin: the helper moved here.)"""
    outcome = pd.Series(values, dtype=object)
    sets = (("ok",), ("cancelled", "timeout"), ("length_mismatch",), ())
    got = rc.text_flags(outcome, *sets)
    for names, flags in zip(sets, got, strict=True):
        assert flags.tolist() == outcome.isin(names).tolist()


# (outcome, length_ok, class): every rule of the module docstring, one row each
CASES = [
    ("ok", 1.0, "ok"),
    ("ok", np.nan, "ok"),  # no length asked for: not a mismatch
    ("ok", 0.0, "length_mismatch"),  # served, but not the length asked for
    ("length_mismatch", 1.0, "length_mismatch"),
    ("length_mismatch", np.nan, "length_mismatch"),
    ("cancelled", 0.0, "cancelled"),  # cancelled wins over a mismatch
    ("cancelled", 1.0, "cancelled"),
    ("timeout", 1.0, "error"),
    ("timeout", 0.0, "length_mismatch"),  # as the summary always counted it
    ("http_error", np.nan, "error"),
    (None, 1.0, "error"),  # a missing outcome is a failure, not a success
    (np.nan, np.nan, "error"),
]


@pytest.mark.parametrize(("outcome", "length_ok", "expected"), CASES)
def test_one_row_gets_its_class(outcome: object, length_ok: float, expected: str) -> None:
    code = rc.class_codes(pd.Series([outcome], dtype=object), pd.Series([length_ok]))
    assert rc.CLASSES[int(code[0])] == expected


def test_a_frame_of_every_case_gets_every_class_in_row_order() -> None:
    outcome = pd.Series([c[0] for c in CASES], dtype=object)
    length_ok = pd.Series([c[1] for c in CASES])
    code = rc.class_codes(outcome, length_ok)
    assert code.dtype == np.int8
    assert [rc.CLASSES[c] for c in code] == [c[2] for c in CASES]


def test_without_length_ok_only_the_outcome_counts() -> None:
    code = rc.class_codes(pd.Series(["ok", "length_mismatch", "cancelled", "timeout"]))
    assert code.tolist() == [rc.OK, rc.MISMATCH, rc.CANCELLED, rc.ERROR]


@pytest.mark.parametrize(
    ("phases", "measured"),
    [
        (["warmup", "measure", "baseline", "cooldown", None], [False, True, True, False, False]),
        ([], []),
    ],
)
def test_measured_is_the_measured_phases(phases: list, measured: list) -> None:
    rows = pd.DataFrame({"outcome": ["ok"] * len(phases), "phase": pd.Series(phases, dtype=object)})
    classes = rc.RowClasses.of(rows)
    assert classes.measured.tolist() == measured
    assert rc.RowClasses.of(rows, ("warmup",)).measured.tolist() == [p == "warmup" for p in phases]


def test_without_a_phase_column_no_row_is_measured() -> None:
    classes = rc.RowClasses.of(pd.DataFrame({"outcome": ["ok", "timeout"]}))
    assert classes.measured.tolist() == [False, False]
    assert classes.ok.tolist() == [True, False]
    assert classes.judged.tolist() == [True, True]


def test_take_keeps_each_row_with_its_class() -> None:
    rows = pd.DataFrame(
        {"outcome": ["ok", "cancelled", "timeout"], "phase": ["measure", "warmup", "baseline"]}
    )
    classes = rc.RowClasses.of(rows)
    picked = classes.take(np.array([2, 0]))
    assert picked.code.tolist() == [rc.ERROR, rc.OK]
    assert picked.measured.tolist() == [True, True]
    assert classes.take(classes.measured).code.tolist() == [rc.OK, rc.ERROR]
    assert classes.judged.tolist() == [True, False, True]


def _run(outcomes: list[str]) -> Run:
    requests = pd.DataFrame(
        {"outcome": outcomes, "phase": ["measure"] * len(outcomes), "length_ok": 1.0}
    )
    empty = pd.DataFrame()
    return Run(
        path=Path("run"),
        run_info={},
        stages=empty,
        requests=requests,
        gpu=empty,
        server_metrics=empty,
        client=empty,
    )


def test_a_run_is_classified_once_and_a_replaced_run_anew() -> None:
    run = _run(["ok", "timeout"])
    first = rc.run_classes(run)
    assert rc.run_classes(run) is first  # the same arrays, not a second classification
    other = replace(run, requests=run.requests.assign(outcome=["timeout", "ok"]))
    assert rc.run_classes(other).code.tolist() == [rc.ERROR, rc.OK]
    assert rc.run_classes(run).code.tolist() == [rc.OK, rc.ERROR]
