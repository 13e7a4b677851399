"""The latency profile's line is the mean time per token; the what-if model's, the bare step.

The fixture server with ``prefill_stalls`` runs every newcomer's 12.6-ms prefill in the batch's
steps: its chunk gap (ITL) stays 7.4 ms at every batch while each request's time per token grows
by 12.6 / 31 ms per sequence beside it. An autoscaler's queue model needs that growth
(``latency-profile.yaml``: TPOT, prefills included); the what-if model adds the prefills itself
from the bare step, so it reads the gap.
"""

from __future__ import annotations

import pytest
import yaml

from analysis.cluster.profile import fit_profile, profile_yaml
from analysis.pipeline import analyze_run
from analysis.predict.fit import fit_capacity
from analysis.report.predict_words import MEAN_TOKEN_WORDS
from tests.support.report_fixtures import OUTPUT_TOKENS, write_run_dir

#: the fixture's stall per token for each sequence in the batch, and its bare gap
STALL_MS = 12.6 / (OUTPUT_TOKENS - 1)
GAP_MS = 7.4


@pytest.fixture(scope="module")
def stalled(tmp_path_factory):
    root = tmp_path_factory.mktemp("stalled")
    # 16 slots: no level queues; no server gauge: the batch is the users, exactly
    run = write_run_dir(root / "run", slots=16, prefill_stalls=True, with_server_metrics=False)
    return analyze_run(run)


@pytest.mark.parametrize(
    ("figure", "source", "slope"),
    [("mean_token", "tpot", STALL_MS), ("engine_step", "itl", 0.0)],
)
def test_each_figure_reads_its_own_column(stalled, figure, source, slope) -> None:
    prof = fit_profile(stalled, figure)
    assert (prof.figure, prof.step_source) == (figure, source)
    assert prof.decode.slope == pytest.approx(slope, abs=0.05), prof.decode_points
    if figure == "engine_step":
        assert prof.decode.intercept == pytest.approx(GAP_MS, rel=1e-6)


def test_the_file_and_the_model_each_say_what_they_fitted(stalled) -> None:
    doc = yaml.safe_load(profile_yaml(stalled))
    mean = fit_profile(stalled)
    assert doc["decode"]["beta_ms_per_seq"] == pytest.approx(mean.decode.slope, abs=1e-4)
    assert doc["decode"]["step_from"] == MEAN_TOKEN_WORDS  # the figure, not its wording
    assert "tpot_p50_ms" in doc["decode"]["stages"][0]
    fit = fit_capacity(stalled)
    assert fit.decode_source == "itl" and fit.params.beta_ms.value == pytest.approx(0.0, abs=1e-6)
