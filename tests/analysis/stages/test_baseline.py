"""compute_baseline: the median and P95 of the single-machine source, the interference
warning, the fallbacks."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.inputs.load import read_run
from analysis.model import BaselineNote
from analysis.report.knee_json import from_json, to_json
from analysis.stages.baseline import compute_baseline
from analysis.stages.summary import summarize_stages
from tests.support.knee_frames import frame, stage
from tests.support.knee_rundir import request_row, stage_row, write_run

T0 = 1_700_000_000.0


def _run(tmp_path, e2e):
    stages = [stage_row(0, 1, T0, kind="baseline", measure_s=60.0), stage_row(1, 4, T0 + 100)]
    rows = [request_row(0, 0, T0 + 0.1, 400.0, phase="warmup")]
    rows += [request_row(i + 1, 0, T0 + 1 + i * 2.5, value, phase="baseline",
                         completion_tokens=50 + i, ttft_ms=value / 5)
             for i, value in enumerate(e2e)]  # fmt: skip
    rows.append(request_row(99, 1, T0 + 102, 300.0))
    return read_run(write_run(tmp_path / "run", stages=stages, requests=rows))


def test_median_and_p95_of_latency_and_seconds_per_1k(tmp_path):
    e2e = np.linspace(200.0, 260.0, 21)
    run = _run(tmp_path, e2e)
    baseline = compute_baseline(run, summarize_stages(run))
    completion = 50 + np.arange(21)
    assert baseline.source == "baseline" and baseline.requests == 21 and baseline.stage == 0
    assert baseline.e2e_p50_ms == pytest.approx(np.median(e2e))
    assert baseline.e2e_p95_ms == pytest.approx(np.percentile(e2e, 95))
    assert baseline.s_per_1k_total_p50 == pytest.approx(np.median(e2e / (100 + completion)))
    assert baseline.s_per_1k_total_p95 == pytest.approx(np.percentile(e2e / (100 + completion), 95))
    assert baseline.s_per_1k_completion_p95 == pytest.approx(np.percentile(e2e / completion, 95))
    assert baseline.warnings == ()
    assert baseline.interference_suspected is False


@pytest.mark.parametrize(("tail", "warned"), [(290.0, False), (1000.0, True)])
def test_interference_warning_when_p95_far_above_median(tmp_path, tail, warned):
    e2e = np.r_[np.full(18, 200.0), np.full(3, tail)]  # P95 lands on the tail
    run = _run(tmp_path, e2e)
    baseline = compute_baseline(run, summarize_stages(run))
    assert baseline.interference_suspected is warned
    if warned:
        (note,) = [w for w in baseline.warnings if getattr(w, "figure", None) == "e2e_ms"]
        assert isinstance(note, BaselineNote) and (note.kind, note.limit_ratio) == ("spread", 1.5)
        assert note.p50 is not None and note.p95 is not None
        assert note.p95 / note.p50 == pytest.approx(5.0)


def _mix_run(tmp_path, tpot):
    """A replayed log's baseline: completions of 10-160 tokens at ``tpot`` ms each after a
    20-ms first token, so e2e spreads 8× with the lengths alone."""
    stages = [stage_row(0, 1, T0, kind="baseline", measure_s=60.0), stage_row(1, 4, T0 + 100)]
    completions = np.linspace(10, 160, 21).round()
    rows = [request_row(i, 0, T0 + 1 + i * 2.5, 20.0 + (n - 1) * t, phase="baseline",
                        completion_tokens=n, ttft_ms=20.0, tpot_ms=t)
            for i, (n, t) in enumerate(zip(completions, tpot, strict=True))]  # fmt: skip
    rows.append(request_row(99, 1, T0 + 102, 300.0))
    return read_run(write_run(tmp_path / "run", stages=stages, requests=rows))


@pytest.mark.parametrize(
    ("tpot", "figures"),
    [
        (np.full(21, 10.0), ()),  # a quiet server: the lengths' spread is no interference
        (np.r_[np.full(18, 10.0), np.full(3, 25.0)], ("tpot_ms",)),  # steps 2.5× slow at times
    ],
)
def test_a_mix_reads_its_spread_on_the_decode_step_alone(tmp_path, tpot, figures):
    run = _mix_run(tmp_path, tpot)
    baseline = compute_baseline(run, summarize_stages(run))
    assert baseline.e2e_p95_ms / baseline.e2e_p50_ms > 1.5  # the lengths spread it
    spread = tuple(w.figure for w in baseline.warnings if getattr(w, "kind", "") == "spread")
    assert spread == figures
    assert baseline.interference_suspected is bool(figures)


def test_spread_limit_is_a_parameter(tmp_path):
    e2e = np.r_[np.full(18, 200.0), np.full(3, 290.0)]
    run = _run(tmp_path, e2e)
    baseline = compute_baseline(run, summarize_stages(run), spread_limit=1.2)
    assert baseline.interference_suspected is True


def test_too_few_baseline_requests_are_flagged(tmp_path):
    run = _run(tmp_path, [200.0] * 5)
    baseline = compute_baseline(run, summarize_stages(run))
    assert BaselineNote("few_requests", requests=5, min_requests=20) in baseline.warnings


def test_first_step_stage_stands_in_and_none_when_nothing_served():
    summary = frame([stage(4, output_tok_s=200.0, e2e_p50_ms=100.0, e2e_p95_ms=120.0)])
    baseline = compute_baseline(None, summary)
    assert baseline.source == "first_stage" and baseline.target_users == 4
    assert baseline.output_tok_s == 50.0  # per user
    assert baseline.s_per_1k_total_p95 is None  # needs raw rows
    assert baseline.warnings == (BaselineNote("first_stage", users=4),)
    empty = frame([stage(4, ok=0, errors=10)])
    nothing = compute_baseline(None, empty)
    assert nothing.source == "none" and nothing.warnings == (BaselineNote("no_baseline"),)


def test_interference_flag_follows_either_spread_warning_and_no_other():
    """The flag is set where a spread warning is written: on the per-1k spread alone too, and
    never by the other warnings (too few requests, a stand-in stage)."""
    kind = {"kind": "baseline"}
    tight = stage(1, **kind, e2e_p50_ms=100.0, e2e_p95_ms=120.0, s_per_1k_total_tokens=1.0,
                  s_per_1k_total_p95=1.2, ok=5)  # fmt: skip
    baseline = compute_baseline(None, frame([tight]))
    assert baseline.warnings == (BaselineNote("few_requests", requests=5, min_requests=20),)
    assert baseline.interference_suspected is False
    per_1k = stage(1, **kind, e2e_p50_ms=100.0, e2e_p95_ms=120.0, s_per_1k_total_tokens=1.0,
                   s_per_1k_total_p95=3.0)  # fmt: skip
    baseline = compute_baseline(None, frame([per_1k]))
    assert baseline.interference_suspected is True
    assert baseline.warnings == (
        BaselineNote("spread", figure="s_per_1k", p50=1.0, p95=3.0, limit_ratio=1.5),
    )
    fallback = compute_baseline(None, frame([stage(4, e2e_p50_ms=100.0, e2e_p95_ms=120.0)]))
    assert fallback.warnings and fallback.interference_suspected is False


def test_the_interference_flag_survives_knee_json(tmp_path):
    e2e = np.r_[np.full(18, 200.0), np.full(3, 1000.0)]
    run = _run(tmp_path, e2e)
    summary = summarize_stages(run)
    baseline = compute_baseline(run, summary)
    assert baseline.interference_suspected is True
    back = from_json(to_json(summary, None, baseline, None)).baseline
    assert back is not None and back.interference_suspected is True
