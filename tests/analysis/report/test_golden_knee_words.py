"""Golden output: the words of every kind of knee fact (:mod:`analysis.report.knee_words`,
:mod:`analysis.report.knee_summary`, :mod:`analysis.report.stage_reasons`).

The judgement's tests assert on the facts; this file pins what each fact says, branch by branch,
in ``tests/support/data/golden/knee_words.txt`` (one ``case: words`` line each). When a rewording
is intended, regenerate it with the other golden files and review the diff:

    LOADKNEE_UPDATE_GOLDEN=1 python -m pytest -n 0 tests/analysis/report/test_golden_knee_words.py
"""

from __future__ import annotations

import dataclasses

from analysis.knee.facts import (
    AbsentFact,
    ClientBoundFact,
    ClientCpuFact,
    ClientQueueFact,
    ClientUnqueuedFact,
    ConfidenceFact,
    ErrorsFact,
    GainFact,
    GaugeCheckFact,
    InFlightFact,
    KneeSummaryFact,
    MemoryFact,
    NoiseFact,
    NoSignalFact,
    OomFact,
    PlateauFact,
    RefusalsFact,
    ResumedFact,
    ServerQueueFact,
    SlaFact,
    TailFact,
)
from analysis.knee.fit import KneeFit
from analysis.model import FaultReason, Signal, StageFault, StageVerdict
from analysis.report.knee_summary import confidence_text, fit_text, summary_text
from analysis.report.knee_words import fact_text, signal_text
from analysis.report.stage_reasons import reason_text, rows_text
from analysis.stages.data_check import RowsFact
from tests.support.golden import check_golden

_GAIN = {
    "prev_users": 24.0, "users": 32.0, "prev_rate": 1480.0, "rate": 1536.0,
    "single_user_rate": 100.0, "added_per_user": 7.0, "gain_ratio": 0.07,
}  # fmt: skip
_LOST = {**_GAIN, "rate": 8.5, "prev_rate": 9.25, "added_per_user": -0.09375,
         "single_user_rate": 2.5, "gain_ratio": -0.0037}  # fmt: skip

#: case → fact: every kind, and each branch of its words
CASES = {
    "flattening, flat": GainFact("flattening", "output_tok_s", 0.15, **_GAIN),
    "flattening, not flat": GainFact("flattening", "qps", 0.05, **_GAIN),
    "flattening, noise bound": GainFact(
        "flattening", "output_tok_s", 0.15, **{**_GAIN, "gain_upper_ratio": 0.1137}
    ),
    "flattening, the latency's reading": GainFact(
        "flattening",
        "output_tok_s",
        0.15,
        **{**_GAIN, "latency_gain_ratio": 0.0579, "latency_gain_upper_ratio": 0.0612},
    ),
    "narrowing, the latency's reading unsaid": GainFact(
        "narrowing",
        "output_tok_s",
        0.5,
        **{**_GAIN, "latency_gain_ratio": 0.0579, "latency_gain_upper_ratio": 0.0612},
    ),
    "flattening, lost, small rates": GainFact("flattening", "total_tok_s", 0.15, **_LOST),
    "flattening, no earlier stage": GainFact("flattening", "output_tok_s", 0.15),
    "narrowing, narrowing": GainFact("narrowing", "output_tok_s", 0.5, **_GAIN),
    "narrowing, not": GainFact("narrowing", "output_tok_s", 0.05, **_GAIN),
    "on the fit's plateau": PlateauFact("on_plateau", 16.0, 8.2, 7.4, 8.6, 0.031),
    "on the fit's plateau, one user": PlateauFact("on_plateau", 12.0, 8.0, 8.1, 7.9, 0.0),
    "tail departed": TailFact(
        "tail", "p95", "e2e", 1800.0, 200.0, "baseline", 9.0, None, 2.0, "departed"
    ),
    "tail departed, bound to the same precision": TailFact(
        "tail", "p95", "e2e", 529.4, 200.0, "baseline", 2.647, 2.646, 2.0, "departed"
    ),
    "tail undecided": TailFact(
        "tail", "p95", "e2e", 440.0, 200.0, "baseline", 2.2, 1.9, 2.0, "undecided"
    ),
    "tail held": TailFact("tail", "p99", "e2e", 380.0, 200.0, "baseline", 1.9, 1.85, 2.0, "held"),
    "tail held, no yardstick": TailFact(
        "tail", "p95", "e2e", 380.0, None, "baseline", None, None, 2.0, "held"
    ),
    "tail per 1k tokens, 1-user level": TailFact(
        "tail", "p95", "s_per_1k", 7.0, 1.5, "one_user_level", 4.667, None, 1.5, "departed"
    ),
    "sla": SlaFact("sla", "p99", 2612.0, 2500.0),
    "memory pressure, KV": MemoryFact("memory_pressure", "kv_cache", 88.5, 85.0),
    "memory pressure, pre-allocated": MemoryFact("memory_pressure", "gpu_preallocated", None, 85),
    "oom risk, GPU": MemoryFact("oom_risk", "gpu", 96.0, 95.0),
    "oom": OomFact("oom", 99.5, 12, 99.0),
    "oom crash": OomFact("oom_crash", 3.0, 40, 99.0, gpu_before_pct=91.0),
    "errors": ErrorsFact("errors", 97.5, 5, 200, 0.0),
    "error rate": ErrorsFact("error_rate", 80.0, 200, 1000, 5.0),
    "error rate, nothing served": ErrorsFact("error_rate", None, 0, 0, 5.0),
    "refusals": RefusalsFact("refusals", 2, 62, 3.2258),
    "client cpu": ClientCpuFact("client_cpu", 97.0, 90.0),
    "no server queue": AbsentFact("no_server_queue"),
    "no client queue": AbsentFact("no_client_queue"),
    "no in-flight estimate": AbsentFact("no_in_flight"),
    "no interval": AbsentFact("no_interval"),
    "server saturated": ServerQueueFact(
        "server_saturated", 8.0, 8.0, 8.0, 16.0, 1.0, running_peak=8.0, running_share=0.9
    ),
    "server free slots": ServerQueueFact("server_free_slots", 34.0, 40.0, 0.0, 34.0, 1.0),
    "server free slots, a wait for a step": ServerQueueFact(
        "server_free_slots", 30.5, 40.0, 2.5, 34.0, 1.0, overrules_client=True
    ),
    "server free slots overrule": ServerQueueFact(
        "server_free_slots", 34.0, 40.0, 0.0, 34.0, 1.0, overrules_client=True
    ),
    "interval": NoiseFact("interval", 10.0, 5.0, 60.0, width_pct=2.04, windows=12.0),
    "interval too wide": NoiseFact("interval", 10.0, 5.0, 1777.0, width_pct=18.0, windows=10.0),
    "interval too wide, no need": NoiseFact("interval", 10.0, 5.0, None, width_pct=18.0),
    "window too short": NoiseFact("window_too_short", 10.0, 5.0, 19.0, window_s=2.0),
    "client saturated": ClientQueueFact(
        "client_saturated", 7.93, 7.5, 8.2, 8.0, 6.1, 5.4, 16.0, 48.0, 1234.0, 0.5
    ),
    "client saturated, bare": ClientQueueFact(
        "client_saturated", 7.93, None, None, 8.0, 0.3, None, 8.0, 0.0, None, 1.0
    ),
    "client unqueued": ClientUnqueuedFact("client_unqueued", 0.4, 0.5),
    "in flight": InFlightFact("in_flight", 15.2, 16.0, 0.95, 0.9),
    "in flight, starved": InFlightFact("in_flight", 10.0, 16.0, 0.625, 0.9),
    "in flight, after errors": InFlightFact("in_flight_after_errors", 10.0, 16.0, 0.625, 0.9),
    "throughput resumed": ResumedFact("throughput_resumed", "output_tok_s", 8, 237.0, 144.0, 15.0),
    "gauges disagree, running": GaugeCheckFact("gauges_disagree", 9.5, 8.0, True, None),
    "gauges disagree, verdicts": GaugeCheckFact("gauges_disagree", 8.1, 8.0, False, True),
    "gauges disagree, both": GaugeCheckFact("gauges_disagree", 5.0, 8.0, True, False),
}


_KNEE = StageVerdict(5, 32, "knee", ("first reason", "second reason", "third reason"), ())
_RED = StageVerdict(6, 48, "red_line", ("the red line's reason",), ())
_SUMMARY = KneeSummaryFact(
    stages=6, top_users=48, lacking_users=(), first_lacking=None, knee=_KNEE, red_line=_RED,
    max_concurrency=24, server_slots=None, client_slots=None, server_reports_queue=True,
    fit_flat=None, capacity=None, untrusted_users=(), noisy_users=(), tail_source="baseline",
    tail_percentile="p95",
)  # fmt: skip
#: case → the summary's fact
SUMMARIES = {
    "knee and red line": _SUMMARY,
    "no stage": dataclasses.replace(_SUMMARY, stages=0),
    "no stage judged": dataclasses.replace(
        _SUMMARY, lacking_users=(1, 2, 4, 8, 16, 32), first_lacking=RowsFact("no_requests", 0, 0)
    ),
    "no knee, one user, client side alone": dataclasses.replace(
        _SUMMARY, knee=None, red_line=None, top_users=1, max_concurrency=None,
        server_reports_queue=False),
    "server slots, fit flat, untrusted, noisy, lacking, 1-user tail": dataclasses.replace(
        _SUMMARY, server_slots=8, fit_flat=True, capacity=(7.4, 8.6, 8.2), untrusted_users=(32,),
        noisy_users=(8, 16), lacking_users=(2,), tail_source="one_user_level",
        tail_percentile="p99"),
    "fit flat, its interval holds the capacity": dataclasses.replace(
        _SUMMARY, max_concurrency=8, fit_flat=True, capacity=(7.4, 8.6, 8.2)),
    "client slots, no plateau": dataclasses.replace(
        _SUMMARY, client_slots=9, fit_flat=False, capacity=(1.0, 3.0, 2.0)),
    "rows missing": dataclasses.replace(_SUMMARY, missing_rows_users=(16, 32)),
    "no stage judged, rows missing": dataclasses.replace(
        _SUMMARY, lacking_users=(1, 2, 4, 8, 16, 32),
        first_lacking=FaultReason(StageFault(1, 1, "not_measured", 0, 10.0), 100.0, 112.5)),
}  # fmt: skip
_FIT = KneeFit(8.2, 7.4, 8.6, 0.91, 0.031, 0.06, True, 7, 0.15)
#: case → the fit over all stages
FITS = {"flat": _FIT, "no plateau": dataclasses.replace(_FIT, flat=False, plateau_high=0.3)}
_SURE = ConfidenceFact(8, True, 100.0, 200, (), 90.0, 60.0)
#: case → the knee's confidence
CONFIDENCES = {
    "no per-window data": dataclasses.replace(_SURE, same_pct=None),
    "confident": _SURE,
    "fairly sure, the answer": dataclasses.replace(
        _SURE, knee_found=False, same_pct=72.5, others=((None, 20.0), (12, 7.5))),
    "unsure": dataclasses.replace(_SURE, same_pct=41.0, others=((16, 59.0),)),
}  # fmt: skip
#: case → a stage's rows
ROWS = {
    "no requests": RowsFact("no_requests", 0, 0),
    "lengths missed": RowsFact("lengths_missed", 20, 15),
    "none usable": RowsFact("none_usable", 4, 0),
    "some excluded": RowsFact("some_excluded", 20, 5),
}
#: case → why a stage whose rows disagree with stages.csv was not judged
FAULTS = {
    "not measured": FaultReason(StageFault(3, 4, "not_measured", 0, 10.0), 100.0, 112.5),
    "not measured, no times": FaultReason(StageFault(3, 4, "not_measured", 0, 10.0), None, None),
    "no rows": FaultReason(StageFault(3, 4, "no_rows", 0, 10.0), 200.0, 112.5),
    "no rows, no window": FaultReason(StageFault(3, 4, "no_rows", 0, None), 200.0, 112.5),
    "rows cut": FaultReason(StageFault(3, 4, "rows_cut", 7, 10.0), 118.0, 112.5),
    "rows cut, no times": FaultReason(StageFault(3, 4, "rows_cut", 1, 10.0), None, 112.5),
    "empty window": FaultReason(StageFault(3, 4, "empty_window", 0, 0.0), 200.0, 112.5),
}


def _text() -> str:
    lines = [f"{case}: {fact_text(fact)}" for case, fact in CASES.items()]
    said = Signal("memory_pressure", True, 90.0, 85.0, "GPU memory peak 90 % (schema 1)")
    lines.append(f"a signal read from schema 1: {signal_text(said)}")
    cpu = Signal("client_bound", True, 97.0, 90.0, fact=CASES["client cpu"])
    client, none = reason_text(ClientBoundFact(cpu)), reason_text(NoSignalFact())
    lines += [f"client untrusted: {client}", f"no signal: {none}"]
    lines += [f"rows, {case}: {rows_text(fact)}" for case, fact in ROWS.items()]
    lines += [f"rows missing, {case}: {reason_text(fact)}" for case, fact in FAULTS.items()]
    lines += [f"fit, {case}: {fit_text(fit)}" for case, fit in FITS.items()]
    lines += [f"confidence, {case}: {confidence_text(f)}" for case, f in CONFIDENCES.items()]
    lines += [f"summary, {case}: {summary_text(fact)}" for case, fact in SUMMARIES.items()]
    return "\n".join(lines) + "\n"


def test_every_knee_fact_kind_has_its_golden_words() -> None:
    text = _text()
    check_golden("knee_words.txt", text)
