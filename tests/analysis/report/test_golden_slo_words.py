"""Golden output: the words of the SLO verdicts (:mod:`analysis.report.slo_words`): the limits
used, what broke each stage, the capacity's summary and doubt, and the traffic classes.

The SLO tests assert on the verdicts as values (:mod:`analysis.slo.facts`); this file pins what
each says, branch by branch, in ``tests/support/data/golden/slo_words.txt`` (one ``case: words``
line each). When a rewording is intended, regenerate it with the other golden files and review
the diff:

    LOADKNEE_UPDATE_GOLDEN=1 python -m pytest -n 0 \\
        tests/analysis/report/test_golden_slo_words.py
"""

from __future__ import annotations

import argparse
import dataclasses

import pandas as pd

from analysis.knee.find import find_knee
from analysis.report.slo_words import (
    breaks_text,
    classes_text,
    doubt_text,
    limits_text,
    summary_text,
)
from analysis.slo.classes import ClassesResult, ClassResult
from analysis.slo.evaluate import SloResult, StageSlo, evaluate_slos, evaluate_stage
from analysis.stages.baseline import compute_baseline
from loadknee_core.slo_targets import SloParams, Threshold, parse_slo
from loadknee_core.traffic_classes import TrafficClass
from tests.support.golden import check_golden
from tests.support.knee_frames import seed_002_summary


# --- the words, as the report layer writes them -------------------------------------------
def limits(slo: SloResult) -> str:
    return limits_text(slo.params)


def params_limits(params: SloParams) -> str:
    return limits_text(params)


def breaks(stage: StageSlo) -> str:
    return " | ".join(breaks_text(stage.breaks)) or "-"


def summary(slo: SloResult) -> str:
    return summary_text(slo)


def doubt(slo: SloResult) -> str:
    return doubt_text(slo.doubt) or "-"


def classes(result: ClassesResult) -> str:
    return classes_text(result)


def make_classes(results: tuple[ClassResult, ...], binding: str | None) -> ClassesResult:
    return ClassesResult(results, binding)


# --- the cases ------------------------------------------------------------------------------
def _seed(sla_ms: float = 2000.0, tail: str = "p99", **knee_changes) -> tuple:
    summary_frame = seed_002_summary()
    knee = find_knee(summary_frame, compute_baseline(None, summary_frame))
    noisy = knee_changes.pop("noisy", ())
    knee = dataclasses.replace(
        knee,
        stages=tuple(dataclasses.replace(v, noisy=v.target_users in noisy) for v in knee.stages),
        **knee_changes,
    )
    params = SloParams.from_cli_args(argparse.Namespace(), sla_ms=sla_ms, tail=tail)
    return summary_frame, knee, params


def _result(sla_ms: float = 2000.0, **knee_changes) -> SloResult:
    summary_frame, knee, params = _seed(sla_ms, **knee_changes)
    slo = evaluate_slos(summary_frame, knee, params=params)
    assert slo is not None
    return slo


def _rows(n_ok: int, n_error: int, ttft: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "cls": ["ok"] * n_ok + ["error"] * n_error,
            "ttft_ms": [ttft] * (n_ok + n_error),
            "e2e_ms": [ttft * 4] * (n_ok + n_error),
            "tpot_ms": [20.0] * (n_ok + n_error),
            "completion_tokens": [100] * (n_ok + n_error),
            "prompt_tokens": [100] * (n_ok + n_error),
        }
    )


def _stage_cases() -> dict[str, StageSlo]:
    row = pd.Series({"stage": 3, "target_users": 8, "window_s": 10.0, "e2e_p95_ms": float("nan")})
    ttft = SloParams(slos=(parse_slo("ttft_p95_ms=500"), parse_slo("e2e_p95_ms=100")))
    per_1k = SloParams(slos=(parse_slo("s_per_1k_p95=1"),))
    good = SloParams(goodput=(Threshold("ttft", 500.0),), goodput_min_pct=90.0)
    return {
        "over by much, and over by little": evaluate_stage(
            row, _rows(20, 0, 505.0), ttft, red_line=False
        ),
        "seconds per 1k tokens": evaluate_stage(row, _rows(20, 0, 800.0), per_1k, red_line=False),
        "not measured": evaluate_stage(
            row, None, SloParams(slos=(parse_slo("e2e_p95_ms=100"),)), red_line=False
        ),
        "goodput short": evaluate_stage(row, _rows(8, 2, 100.0), good, red_line=False),
        "goodput of no request": evaluate_stage(row, _rows(0, 0, 100.0), good, red_line=False),
        "goodput without rows": evaluate_stage(row, None, good, red_line=False),
        "red line": evaluate_stage(row, _rows(20, 0, 100.0), good, red_line=True),
    }


def _class_cases() -> dict[str, ClassesResult]:
    frame = pd.DataFrame()
    slo = _result()
    chat = TrafficClass("chat", 3.0, 200, 100, ("e2e_p99_ms=2000",))
    batch = TrafficClass("batch", 1.0, 2000, 500)
    shares = {0: 100.0, 1: 74.5, 2: 75.25}
    met = dataclasses.replace(slo, stages=tuple(s for s in slo.stages if s.met))
    return {
        "binding, breaks first": make_classes(
            (ClassResult(chat, frame, shares, slo, 24), ClassResult(batch, frame, {}, None, None)),
            "chat",
        ),
        "binding, never broken": make_classes(
            (ClassResult(chat, frame, shares, met, None),), "chat"
        ),
        "no class with an SLO": make_classes(
            (ClassResult(batch, frame, {0: 100.0}, None, None),), None
        ),
    }


def _text() -> str:
    seed = _result()
    lines = [f"limits: {limits(seed)}"]
    lines += [f"stage {s.target_users} breaks: {breaks(s)}" for s in seed.stages]
    results = {
        "latency-bound": seed,
        "latency-bound, the break noisy": _result(noisy=(24,)),
        "latency-bound, the capacity noisy": _result(noisy=(16,)),
        "throughput-bound": _result(max_concurrency=8),
        "no knee figure": _result(max_concurrency=None),
        "none meets them": _result(sla_ms=1.0),
    }
    for case, slo in results.items():
        lines += [f"summary, {case}: {summary(slo)}", f"doubt, {case}: {doubt(slo)}"]
    again = dataclasses.replace(
        seed, stages=(*seed.stages[:3], dataclasses.replace(seed.stages[3], met=True))
    )
    from analysis.slo.evaluate import capacity_doubt

    _, knee, _ = _seed()
    lines.append(f"doubt, passing again: {doubt_text(capacity_doubt(again.stages, knee)) or '-'}")
    lines += [f"stage, {case}: {breaks(stage)}" for case, stage in _stage_cases().items()]
    goodput = SloParams(
        slos=(parse_slo("ttft_p95_ms=500"),),
        goodput=(Threshold("ttft", 500.0), Threshold("s_per_1k", 2.0)),
        goodput_min_pct=90.0,
    )
    lines.append(f"limits, with goodput: {params_limits(goodput)}")
    lines.append(f"limits, none: {params_limits(SloParams())}")
    for case, result in _class_cases().items():
        lines += [f"classes, {case}: {line}" for line in classes(result).split("\n")]
    return "\n".join(lines) + "\n"


def test_every_slo_verdict_has_its_golden_words() -> None:
    text = _text()
    check_golden("slo_words.txt", text)
