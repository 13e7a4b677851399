"""knee.json: strict JSON (NaN → null, numpy → Python) and a lossless round trip."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd

from analysis.report.knee_json import from_json, jsonable, to_json
from analysis.report.knee_summary import fit_words, summary_words
from analysis.report.knee_words import signal_text
from analysis.report.stage_reasons import reasons_text
from tests.support.report_fixtures import (
    seed002_baseline,
    seed002_knee,
    seed002_recs,
    seed002_summary,
)


def test_jsonable_converts_nan_numpy_and_tuples() -> None:
    value = {"a": math.nan, "b": np.float64(1.5), "c": (np.int64(2), math.inf), "d": pd.NA}
    assert jsonable(value) == {"a": None, "b": 1.5, "c": [2, None], "d": None}
    assert type(jsonable(np.int64(3))) is int


def test_knee_json_is_strict_and_nan_is_null() -> None:
    text = to_json(
        seed002_summary(), seed002_knee(), seed002_baseline(), seed002_recs(), run_id="r1"
    )
    assert "NaN" not in text and "Infinity" not in text
    data = json.loads(text)
    assert data["knee"]["knee_users"] == 32
    assert data["summary"][5]["e2e_p99_ms"] is None  # the OOM stage
    assert data["baseline"]["ttft_p95_ms"] is None
    assert data["knee"]["params"]["sla_p99_ms"] is None
    assert data["percentile_method"].startswith("exact")


def test_round_trip_rebuilds_equal_objects() -> None:
    summary, knee, baseline, recs = (
        seed002_summary(),
        seed002_knee(untrusted_stage=3),
        seed002_baseline(),
        seed002_recs(),
    )
    doc = from_json(to_json(summary, knee, baseline, recs, run_id="r1"))
    assert doc.run_id == "r1"
    assert doc.knee is not None
    assert doc.knee.stages == knee.stages
    assert doc.knee.knee_stage == 4 and doc.knee.summary == knee.summary
    assert doc.recommendations == recs
    assert doc.recommendations.server_flags == recs.server_flags
    assert doc.baseline is not None and doc.baseline.e2e_p95_ms == 560.0
    assert math.isnan(doc.baseline.ttft_p95_ms or math.nan)
    pd.testing.assert_frame_equal(doc.summary, summary, check_dtype=False)


def test_round_trip_without_knee_or_recommendations() -> None:
    doc = from_json(to_json(seed002_summary(), None, None, None))
    assert doc.knee is None and doc.baseline is None and doc.recommendations is None
    assert len(doc.summary) == 6


def test_the_signals_facts_round_trip_and_their_words_are_kept_beside_them() -> None:
    from analysis.knee.find import find_knee
    from analysis.stages.baseline import compute_baseline
    from tests.support.knee_frames import seed_002_summary

    summary = seed_002_summary()
    knee = find_knee(summary, compute_baseline(None, summary))
    data = json.loads(to_json(summary, knee, None, None))
    assert data["schema"] == 2
    signal = data["knee"]["stages"][3]["signals"][0]
    assert list(signal) == ["name", "fired", "value", "threshold", "text", "fact"]
    assert signal["fact"]["kind"] == "flattening" and signal["text"] == signal_text(
        knee.stages[3].signals[0]
    )
    back = from_json(to_json(summary, knee, None, None)).knee
    assert back is not None
    unsaid = [dataclasses.replace(v, reasons=()) for v in back.stages]
    assert unsaid == [dataclasses.replace(v, reasons=()) for v in knee.stages]  # facts and all
    # a stage's reasons are kept as the words they were written in (the file carries no reason
    # facts: its bytes stay those of the reports before them)
    assert [v.reasons for v in back.stages] == [reasons_text(v) for v in knee.stages]
    assert back.summary == summary_words(knee) and back.capacity_text == fit_words(knee)


def test_a_schema_1_knee_json_is_still_read_with_its_words() -> None:
    summary, knee = seed002_summary(), seed002_knee()
    data = json.loads(to_json(summary, knee, None, None))
    data["schema"] = 1
    for stage in data["knee"]["stages"]:
        for signal in stage["signals"]:
            del signal["fact"]
            signal["text"] = "as schema 1 wrote it"
    back = from_json(json.dumps(data)).knee
    assert back is not None
    signals = [s for v in back.stages for s in v.signals]
    assert signals and all(
        s.fact is None and signal_text(s) == "as schema 1 wrote it" for s in signals
    )
    assert [s.value for s in signals] == [s.value for v in knee.stages for s in v.signals]
