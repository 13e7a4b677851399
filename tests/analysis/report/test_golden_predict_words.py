"""Golden output: ``loadknee predict``'s screen for each kind of prediction
(:mod:`analysis.report.predict_words`).

The prediction's tests assert on its facts (tests/analysis/predict); this file pins the words
of each branch in ``tests/support/data/golden/predict_words.txt``. When a rewording is
intended, regenerate it and review the diff:

    LOADKNEE_UPDATE_GOLDEN=1 pytest -n 0 tests/analysis/report/test_golden_predict_words.py
"""

from __future__ import annotations

from dataclasses import replace
from typing import get_args

from analysis.advice.facts import DeployBound
from analysis.model import CannotTell
from analysis.predict.check import check
from analysis.predict.facts import (
    Burst,
    CapacityParams,
    Estimate,
    MeasuredRun,
    ProbeReading,
    Workload,
    WorkloadSource,
)
from analysis.predict.whatif import predict
from analysis.report.predict_words import check_text, prediction_text
from analysis.report.standing import CANNOT_TELL_SHORT
from tests.support.golden import check_golden
from tests.support.predict_fits import synthetic_fit

X = Estimate.exact
NAN = Estimate(float("nan"), float("nan"), float("nan"))
SLOTS8 = CapacityParams(Estimate(10.0, 9.0, 11.0), Estimate(0.5, 0.4, 0.6), X(0.02), 8.0,
                        Estimate(16000.0, 15500.0, 16500.0))  # fmt: skip
PROBE_SLOTS = ProbeReading((Burst(256, 16, 32, 8, True), Burst(512, 16, 32, 8, True)), "slots",
                           slots=8)  # fmt: skip
PROBE_KV = ProbeReading((Burst(256, 16, 32, 15, True), Burst(512, 16, 32, 7, True)), "kv",
                        kv_tokens=Estimate(4152.0, 4080.0, 4224.0))  # fmt: skip
COMPUTE = CapacityParams(Estimate(10.0, 9.5, 10.5), Estimate(0.3, 0.25, 0.35), X(0.0), None, None)

#: case → (fit, workload)
CASES = {
    "slots, same lengths": (synthetic_fit(SLOTS8, kv_pct=14.0, kv_source="kv_gauge"),
                            Workload(256, 64)),
    "kv binds at long prompts": (synthetic_fit(SLOTS8, kv_pct=14.0, kv_source="kv_gauge"),
                                 Workload(2048, 64)),
    "kv assumed from the knee": (
        synthetic_fit(replace(SLOTS8, kv_tokens=X(8 * 320.0)), kv_source="knee_assumed"),
        Workload(256, 128),
    ),
    "slots seen by the concurrency probe": (
        replace(synthetic_fit(replace(SLOTS8, kv_tokens=None), kv_source="probe_unseen"),
                slot_source="probe", probe=PROBE_SLOTS),
        Workload(512, 64),
    ),
    "a KV budget seen by the concurrency probe": (
        replace(synthetic_fit(replace(SLOTS8, slots=None, kv_tokens=Estimate(4152.0, 4080.0,
                                                                             4224.0)),
                              kv_source="probe"), probe=PROBE_KV),
        Workload(512, 64),
    ),
    "compute, fitted prefill": (synthetic_fit(COMPUTE, max_batch=40.0, prefill_source="ttft_fit"),
                                Workload(256, 64)),
    "compute, extrapolated": (synthetic_fit(COMPUTE, max_batch=24.0), Workload(256, 64)),
    "compute, refused": (synthetic_fit(COMPUTE, max_batch=8.0), Workload(256, 64)),
    "no decode fit": (synthetic_fit(replace(SLOTS8, alpha_ms=NAN, beta_ms=NAN)),
                      Workload(256, 64)),
    "the run cannot tell": (replace(synthetic_fit(SLOTS8), cannot_tell="tail_in_doubt",
                                    measured_capacity=None), Workload(256, 64)),
}  # fmt: skip


def _other(
    capacity: int | None,
    past: int | None,
    source: WorkloadSource = "rows",
    *,
    knee: tuple[int, int | None] | None = None,
    deploy: tuple[int, DeployBound] | None = None,
    levels: tuple[int, ...] = (1, 2, 4, 8, 12, 16),
) -> MeasuredRun:
    """The other run: its deploy answer ``capacity`` (``past``: the stage past it); its knee
    and deploy answer as given, else the same figure bound by the knee."""
    p95 = tuple((u, 700.0 + 40.0 * max(0, u - 8) ** 1.5) for u in levels)
    knee_users, knee_past = knee or (capacity, past)
    deploy_users, bound = deploy or (capacity, "knee")
    return MeasuredRun("other", Workload(256, 64), source, capacity, past, levels, p95,
                       knee_capacity=knee_users, knee_past_users=knee_past,
                       deploy_users=deploy_users, deploy_bound=bound)  # fmt: skip


#: case → (fit, the other run)
CHECKS = {
    "check, inside": (synthetic_fit(SLOTS8, kv_pct=14.0, kv_source="kv_gauge"), _other(8, 12)),
    "check, outside, lengths from run.json": (
        synthetic_fit(SLOTS8, kv_pct=14.0, kv_source="kv_gauge"), _other(12, 16, "run_json"),
    ),
    "check, top level not reached": (synthetic_fit(COMPUTE, max_batch=40.0), _other(16, None)),
    "check, no hard limit: the tail departs before the throughput flattens": (
        synthetic_fit(COMPUTE, max_batch=64.0),
        _other(32, 48, knee=(48, 64), levels=(1, 2, 4, 8, 16, 24, 32, 48, 64)),
    ),
    "check, a length mix: its slowdown per level": (
        synthetic_fit(COMPUTE, max_batch=64.0),
        replace(
            _other(32, 48, knee=(48, 64), levels=(1, 2, 4, 8, 16, 24, 32, 48, 64)),
            p95_slowdown=tuple(
                (u, 1.0 + 0.032 * (u - 1)) for u in (1, 2, 4, 8, 16, 24, 32, 48, 64)
            ),
        ),
    ),
    "check, the deploy answer bound by memory": (
        synthetic_fit(SLOTS8, kv_pct=14.0, kv_source="kv_gauge"),
        _other(8, 12, deploy=(4, "memory")),
    ),
    "check, no decode fit": (synthetic_fit(replace(SLOTS8, alpha_ms=NAN, beta_ms=NAN)),
                             _other(8, 12)),
    "check, the other run cannot tell": (
        synthetic_fit(SLOTS8, kv_pct=14.0, kv_source="kv_gauge"),
        replace(_other(None, None), cannot_tell="late_client"),
    ),
    "check, the source run cannot tell": (
        replace(synthetic_fit(SLOTS8), cannot_tell="unsure", measured_capacity=None),
        _other(8, 12),
    ),
}  # fmt: skip


def rendered() -> str:
    blocks = [f"== {case}\n{prediction_text(predict(fit, w))}" for case, (fit, w) in CASES.items()]
    blocks += [f"== {case}\n{check_text(check(fit, m))}" for case, (fit, m) in CHECKS.items()]
    return "\n\n".join(blocks) + "\n"


def test_the_words_of_every_kind_of_prediction() -> None:
    text = rendered()
    check_golden("predict_words.txt", text)


#: a prefill measured by the client's probes before the sweep: 2 rounds at 3 prompt lengths
PROBED = replace(
    synthetic_fit(
        replace(COMPUTE, prefill_ms_per_token=Estimate(0.05, 0.048, 0.052)),
        max_batch=40.0,
        prefill_source="probe_fit",
    ),
    prefill_probes=((128.0, 11.4), (64.0, 8.2), (256.0, 17.8)) * 2,
)


def test_the_words_of_a_prefill_measured_by_probes() -> None:
    text = prediction_text(predict(PROBED, Workload(256, 64)))
    check_golden("predict_words_probe_fit.txt", f"== compute, probed prefill\n{text}\n")


#: a model that misses its own run: 677 ms at 1 user where the run measured a median of 520
MISFIT = replace(
    synthetic_fit(SLOTS8, kv_pct=14.0, kv_source="kv_gauge"),
    measured_e2e_ms=((1, 520.0), (2, 700.0), (4, 790.0), (8, 940.0), (12, 1500.0)),
)


def test_the_words_of_a_model_that_misses_its_own_run() -> None:
    text = prediction_text(predict(MISFIT, Workload(256, 128)))
    checked = check_text(check(MISFIT, _other(8, 12)))
    check_golden(
        "predict_words_model_misfit.txt",
        f"== the model misses its run\n{text}\n\n== check, the model misses its run\n{checked}\n",
    )


def test_every_cannot_tell_reason_has_its_few_words() -> None:
    assert set(CANNOT_TELL_SHORT) == set(get_args(CannotTell))
