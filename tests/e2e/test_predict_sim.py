"""``loadknee predict`` on a real simulator run: at the run's own lengths it gives back the
capacity the simulator's parameters imply (its 4 slots), with and without its /metrics; where
the recording's noise leaves the run itself at "cannot tell" (with its evidence: see
tests/support/late_client.py), no prediction.

The run is the recorded ``slots4-drive`` sweep (tests/support/recorded_runs.py). Checking a
prediction at *other* lengths against a real sweep at those lengths is issue 42's benchmark,
not this test."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from analysis.pipeline import analyze_run
from analysis.predict.fit import fit_capacity
from analysis.predict.whatif import predict
from tests.support.late_client import late_cannot_tell
from tests.support.recorded_runs import SLOTS4_SPEC

pytestmark = pytest.mark.slow

SLOTS = 4


@pytest.mark.parametrize("metrics", [True, False], ids=["with-metrics", "without-metrics"])
def test_predict_at_the_runs_lengths_gives_back_its_slots(recorded_run, tmp_path, metrics):
    run = tmp_path / "run"
    shutil.copytree(Path(recorded_run("slots4-drive").path), run)
    if not metrics:
        (run / "server_metrics.csv").unlink(missing_ok=True)
    analysis = analyze_run(run)
    fit = fit_capacity(analysis)
    if late_cannot_tell(analysis):  # the recording's own noise: "cannot tell", with evidence
        # (fresh #18: one slow baseline request left 8 users' tail at 1.98×, within the noise
        # of 2×); a what-if from that run must not give the number analyze withholds
        prediction = predict(fit, fit.workload)
        assert (prediction.refusal, prediction.point) == ("source_cannot_tell", None)
        assert fit.measured_capacity is None
        return
    # drive_sim's requests are not streamed: the step comes from e2e per token; without the
    # running gauge (and with no TTFT for a client-side estimate) the slots from the plateau
    assert fit.decode_source == "e2e_per_token"
    assert fit.slot_source == ("server_gauge" if metrics else "throughput_plateau")
    assert fit.workload.output_tokens == pytest.approx(SLOTS4_SPEC.output_tokens)
    prediction = predict(fit, fit.workload)
    assert prediction.point is not None and prediction.refusal is None
    assert prediction.point.users == SLOTS
    assert prediction.low is not None and prediction.low <= SLOTS <= (prediction.high or 0)
    # twice the output: the sim's KV budget is far from binding, so its 4 slots still do. With
    # the KV gauge the prediction knows it; without, the run cannot tell its 4-sequence limit
    # from a KV budget, so the point reads it as KV (fewer users) and the interval reaches 4
    longer = predict(fit, replace(fit.workload, output_tokens=2 * fit.workload.output_tokens))
    assert longer.point is not None and longer.low is not None and longer.high is not None
    if metrics:
        assert (longer.point.users, longer.point.bound) == (SLOTS, "slots")
    else:
        assert longer.point.bound == "kv" and longer.low <= longer.point.users < SLOTS
        assert longer.high == SLOTS
