"""The rate stages' table and the rate knee, on synthetic rows (numpy as the oracle)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.live.answer import judge
from analysis.pipeline import analyze_run
from analysis.report.rate_words import rate_knee_text, rate_reasons_text
from analysis.stages.rate_stages import (
    FOLLOWS,
    PAST_KNEE,
    RateParams,
    analyze_rates,
    planned_rates,
    rate_knee,
    rate_signals,
    rate_table,
)
from loadknee_core.knee_params import KneeParams
from tests.support.knee_rundir import request_row, saturating_run, stage_row, write_run

WINDOW = (100.0, 110.0)  # each stage's measured window, 10 s


def _rows(
    stage: int, rate: float, e2e_s: float, *, slowdown_s: float = 0.0, wait_ms: float = 0.0
) -> pd.DataFrame:
    """Constant arrivals over the window; each lasts ``e2e_s`` plus ``slowdown_s`` per second
    into the window (a backlog that grows), after ``wait_ms`` for a slot."""
    start, stop = WINDOW
    intended = np.arange(start, stop, 1.0 / rate)
    e2e = e2e_s + slowdown_s * (intended - start)
    return pd.DataFrame(
        {
            "stage": stage,
            "intended_unix_s": intended,
            "start_unix_s": intended + wait_ms / 1000.0,
            "end_unix_s": intended + wait_ms / 1000.0 + e2e,
            "send_wait_ms": wait_ms,
            "e2e_intended_ms": wait_ms + e2e * 1000.0,
        }
    )


def _stages(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "stage": list(range(n)),
            "kind": ["step"] * n,
            "warmup_end_unix_s": [WINDOW[0]] * n,
            "measure_end_unix_s": [WINDOW[1]] * n,
        }
    )


def _one(rows: pd.DataFrame, rate: float, served: float, base_p95: float = 500.0) -> pd.Series:
    summary = pd.DataFrame({"stage": [0], "qps": [served]})
    table = rate_table(summary, rows, _stages(1), [rate], baseline_e2e_p95_ms=base_p95)
    return table.iloc[0]


def test_a_stage_that_follows() -> None:
    row = _one(_rows(0, 4.0, 0.4), 4.0, served=4.0)
    assert row["offered_rps"] == pytest.approx(4.0)
    assert row["served_pct"] == pytest.approx(100.0)
    assert row["backlog_mean"] == pytest.approx(1.6, abs=0.2)  # Little: 4/s × 0.4 s
    assert row["e2e_intended_p95_ms"] == pytest.approx(400.0)
    assert row["tail_ratio"] == pytest.approx(0.8)
    assert row["waited_pct"] == 0.0
    assert row["rate_verdict"] == FOLLOWS and row["rate_reasons"] == ()


@pytest.mark.parametrize(
    ("rows", "served", "base_p95", "kind", "figure"),
    [
        (_rows(0, 10.0, 0.4), 7.0, 500.0, "not_following", ("served_pct", 70.0)),
        (_rows(0, 10.0, 0.4, slowdown_s=0.2), 10.0, 5000.0, "backlog_grew", None),
        (_rows(0, 10.0, 0.4, wait_ms=1100.0), 10.0, 500.0, "tail_departed", ("tail_ratio", 3.0)),
    ],
)
def test_each_signal_alone(
    rows: pd.DataFrame, served: float, base_p95: float, kind: str, figure: tuple | None
) -> None:
    row = _one(rows, 10.0, served=served, base_p95=base_p95)
    assert row["rate_verdict"] == PAST_KNEE
    (signal,) = row["rate_reasons"]
    assert signal.kind == kind, row["rate_reasons"]
    if figure is not None:
        assert getattr(signal, figure[0]) == pytest.approx(figure[1], abs=0.05)
    else:
        assert signal.backlog_last > 1.5 * signal.backlog_first


def test_waits_are_counted() -> None:
    row = _one(_rows(0, 10.0, 0.1, wait_ms=20.0), 10.0, served=10.0, base_p95=100.0)
    assert row["waited_pct"] == 100.0 and row["send_wait_p95_ms"] == pytest.approx(20.0)


def test_signals_missing_inputs_say_nothing() -> None:
    assert rate_signals({"served_pct": math.nan, "tail_ratio": math.nan}, RateParams()) == []


def _sweep(slo: dict[int, bool | None] | None = None) -> tuple[pd.DataFrame, object]:
    rates = [2.0, 4.0, 8.0, 16.0]
    rows = pd.concat(
        [
            _rows(0, 2.0, 0.4),
            _rows(1, 4.0, 0.4),
            _rows(2, 8.0, 0.5),
            _rows(3, 16.0, 0.6, slowdown_s=0.3),
        ]
    )
    summary = pd.DataFrame({"stage": [0, 1, 2, 3], "qps": [2.0, 4.0, 8.0, 11.0]})
    table = rate_table(summary, rows, _stages(4), rates, baseline_e2e_p95_ms=400.0)
    return table, rate_knee(table, slo)


def test_the_rate_knee_and_the_rates_below() -> None:
    table, knee = _sweep()
    assert list(table["rate_verdict"]) == [FOLLOWS] * 3 + [PAST_KNEE]
    assert knee.knee_stage == 3 and knee.knee_rate_rps == 16.0  # type: ignore[attr-defined]
    assert knee.max_rate_rps == 8.0 and knee.slo_max_rate_rps is None  # type: ignore[attr-defined]
    assert knee.reasons[0].kind == "not_following"  # type: ignore[attr-defined]
    assert knee.slo_judged is False  # type: ignore[attr-defined]


def test_max_rate_within_the_slos() -> None:
    _, knee = _sweep({0: True, 1: True, 2: False, 3: False})
    assert knee.slo_max_rate_rps == 4.0  # type: ignore[attr-defined]
    assert knee.slo_judged is True  # type: ignore[attr-defined]


def test_no_knee_in_range() -> None:
    table = pd.DataFrame({"stage": [0, 1], "rate_rps": [1.0, 2.0], "rate_verdict": ["follows"] * 2})
    knee = rate_knee(table)
    assert knee.knee_stage is None and knee.max_rate_rps == 2.0
    assert knee.knee_rate_rps is None and knee.reasons == ()


@pytest.mark.parametrize(
    ("info", "rates"),
    [
        ({"parameters": {"llm_rates": "1,2,4.5"}}, (1.0, 2.0, 4.5)),
        ({"parameters": {"llm_rates": ""}}, None),
        ({"parameters": {}}, None),
        ({}, None),
        ({"parameters": {"llm_rates": "1,x"}}, None),
    ],
)
def test_planned_rates(info: dict, rates: tuple[float, ...] | None) -> None:
    assert planned_rates(info) == rates


def test_closed_loop_runs_have_no_rate_table() -> None:
    rows = _rows(0, 1.0, 0.1).drop(columns=["intended_unix_s"])
    summary = pd.DataFrame({"stage": [0], "qps": [1.0]})
    info = {"parameters": {"llm_rates": ""}}
    assert analyze_rates(summary, rows, _stages(1), info, baseline_e2e_p95_ms=1.0) is None


def test_the_tail_rule_is_the_knees() -> None:
    """The rate knee's tail ratio is the knee's setting: its default and a value given."""
    row = {"served_pct": 100.0, "tail_ratio": 2.5}
    assert RateParams().tail_ratio == KneeParams().tail_ratio
    assert rate_signals(row, RateParams.judged_with(KneeParams())) != []
    assert rate_signals(row, RateParams.judged_with(KneeParams(tail_ratio=3.0))) == []


def _rate_run(run_dir: Path) -> Path:
    """A baseline, then two open-loop rates: 2/s at the baseline's tail, 4/s at 2.5 × it."""
    stages, rows, t, n = [], [], 1_000.0, 0
    plan = [("baseline", None, 400.0), ("step", 2.0, 400.0), ("step", 4.0, 1000.0)]
    for stage, (kind, rate, e2e) in enumerate(plan):
        users = 1 if rate is None else int(rate)
        stages.append(stage_row(stage, users, t, kind=kind, warmup_s=1.0, measure_s=20.0))
        s = t
        while s < t + 21.0:
            phase = "warmup" if s < t + 1.0 else "baseline" if kind == "baseline" else "measure"
            sent = {} if rate is None else {"intended_unix_s": s, "e2e_intended_ms": e2e}
            rows.append(request_row(n, stage, s, e2e, phase=phase, ttft_ms=20.0, **sent))
            n, s = n + 1, s + (e2e / 1000.0 if rate is None else 1.0 / rate)
        t += 23.0
    info = {"run_id": "rates", "parameters": {"llm_rates": "2,4"}}
    return write_run(run_dir, stages=stages, requests=rows, run_info=info)


def test_the_rate_knee_follows_the_knee_tail_ratio_flag(tmp_path: Path) -> None:
    run_dir = _rate_run(tmp_path / "run")
    default = analyze_run(run_dir).rate_knee
    assert default is not None and default.knee_rate_rps == 4.0  # 2.5 × the baseline's tail
    typed = analyze_run(run_dir, knee_overrides={"tail_ratio": 3.0}).rate_knee
    assert typed is not None and typed.knee_stage is None and typed.max_rate_rps == 4.0


def test_the_live_answer_carries_the_rate_table_and_knee(tmp_path: Path) -> None:
    """The web UI's open-loop view reads the live judge's ``rates``: knee.json's rate figures."""
    run_dir = _rate_run(tmp_path / "run")
    rates = judge(str(run_dir))["rates"]
    full = analyze_run(run_dir)
    assert full.rate_stages is not None and full.rate_knee is not None
    assert rates["knee"]["knee_rate_rps"] == full.rate_knee.knee_rate_rps == 4.0
    assert rates["knee"]["max_rate_rps"] == 2.0
    assert rates["knee"]["text"] == rate_knee_text(full.rate_knee)  # the report's own words
    assert [s["stage"] for s in rates["stages"]] == list(full.rate_stages["stage"]) == [1, 2]
    for live, (_, row) in zip(rates["stages"], full.rate_stages.iterrows(), strict=True):
        for key in ("rate_rps", "offered_rps", "served_rps", "backlog_first", "backlog_last"):
            assert live[key] == pytest.approx(row[key]), key
    verdicts = list(full.rate_stages["rate_verdict"])
    assert [s["rate_verdict"] for s in rates["stages"]] == verdicts and len(set(verdicts)) == 2
    words = [rate_reasons_text(r) for r in full.rate_stages["rate_reasons"]]
    assert [s["rate_reasons"] for s in rates["stages"]] == words and words[1]  # words, not objects


def test_a_closed_loop_live_answer_has_no_rates(tmp_path: Path) -> None:
    assert (
        judge(str(saturating_run(tmp_path / "run", capacity=2, levels=(1, 2, 4))))["rates"] is None
    )
