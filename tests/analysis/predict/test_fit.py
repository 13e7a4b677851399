"""The capacity model fitted from contract-shaped run directories whose parameters are known."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.cluster.profile import decode_step
from analysis.pipeline import analyze_run
from analysis.predict.batching import Draws, grid
from analysis.predict.check import measured_run
from analysis.predict.fit import fastest_per_length, fit_capacity, plateau_batch
from analysis.predict.insample import MISFIT_LIMIT
from analysis.predict.whatif import predict
from analysis.report.predict_words import decode_source_text, prediction_text
from tests.support.paths import REPO
from tests.support.report_fixtures import write_run_dir

#: the fixture server: ITL 7.4 ms at every batch, TTFT 20 ms below its 6 slots, 128 + 32 tokens,
#: a KV gauge at 90 % × running / slots
SLOTS, ITL_MS, TTFT_MS, PROMPT, OUTPUT = 6, 7.4, 20.0, 128, 32
#: the refusing test server's recorded runs (tests/analysis/knee/test_busy_recorded_runs.py)
BUSY = REPO / "tests" / "support" / "data" / "busy_runs"


def test_fixed_lengths_fit_the_decode_line_and_assume_the_prefill(tmp_path: Path) -> None:
    fit = fit_capacity(analyze_run(write_run_dir(tmp_path / "run", slots=SLOTS)))
    p = fit.params
    assert p.alpha_ms.value == pytest.approx(ITL_MS)
    assert p.beta_ms.value == pytest.approx(0.0, abs=1e-9)
    assert fit.prefill_source == "baseline_assumed"
    assert p.prefill_ms_per_token.value == pytest.approx((TTFT_MS - ITL_MS) / PROMPT)
    # the gauge reads 90 % when the slots are full: 6 sequences of 128 + 16 tokens in flight
    assert fit.kv_source == "kv_gauge" and fit.kv_gauge_read and fit.models_memory
    assert p.kv_tokens is not None
    assert p.kv_tokens.value == pytest.approx(SLOTS * (PROMPT + OUTPUT / 2) / 0.9)
    assert (fit.workload.input_tokens, fit.workload.output_tokens) == (PROMPT, OUTPUT)
    # the KV budget holds about the 6 sequences the server ran: KV bound the run
    assert fit.run_bound.bound == "kv" and fit.run_bound.slots == SLOTS
    assert p.slots is None  # the running maximum was the KV budget's doing
    assert fit.measured_capacity == 4 and fit.run_bound.knee_users == 8


def _with_probes(probes: object) -> dict:
    """run.json's fields with the client's prefill probes in its prompt source."""
    source = {"kind": "fixed", "input_tokens": PROMPT, "output_tokens": OUTPUT}
    return {"prompt_source": {**source, "prefill_probes": probes}}


def _probes(*tokens: int, per_token: float = 0.05) -> list[list[float]]:
    """Probes from a server whose one-token request takes 5 ms + ``per_token`` per prompt token."""
    return [[t, 5.0 + per_token * t] for t in tokens]


def _jittered(*tokens: int, per_token: float = 0.05) -> list[list[float]]:
    """Three rounds of probes at ``tokens``, the later two slower by a jitter that only adds
    (3 and 5 ms at the shortest length, where it tilts a fit through every probe most)."""
    shortest = min(tokens)
    exact = _probes(*tokens, per_token=per_token)
    slower = [[t, ms + (3.0 if t == shortest else 0.5)] for t, ms in exact]
    slowest = [[t, ms + (5.0 if t == shortest else 1.0)] for t, ms in exact]
    return [*slower, *exact, *slowest]


ASSUMED = (TTFT_MS - ITL_MS) / PROMPT
#: case → (run.json's prefill_probes, the prefill source, γ, the probes behind it)
PROBE_CASES = {
    "three lengths, two rounds": (_probes(128, 64, 256, 128, 64, 256), "probe_fit", 0.05, 6),
    "three probes at two lengths": (_probes(64, 128, 128), "probe_fit", 0.05, 3),
    "five lengths, three rounds, jitter: each length's fastest": (
        _jittered(128, 32, 512, 64, 256), "probe_fit", 0.05, 15,
    ),
    "four lengths, tags a token apart, jitter: each length's fastest": (
        [*_jittered(128, 32, 512, 64), *_probes(129, 33, 513, 65)], "probe_fit", 0.05, 16,
    ),
    "a slope below zero reads no cost": (_probes(64, 128, 256, per_token=-0.01), "probe_fit",
                                         0.0, 3),
    "malformed entries skipped": (
        [*_probes(64, 128, 256), [0, 1.0], [128, -1.0], [True, 3.0], [64, "9"], [64, 5.0, 1],
         [128], {"tokens": 64}, None, "256:17.8"],
        "probe_fit", 0.05, 3,
    ),
    "two probes: too few": (_probes(64, 256), "baseline_assumed", ASSUMED, 0),
    "one length only": (_probes(128, 128, 128), "baseline_assumed", ASSUMED, 0),
    "too few once the malformed are skipped": ([*_probes(64, 256), [128], ["a", 3]],
                                               "baseline_assumed", ASSUMED, 0),
    "not a list": ("64:8.2 128:11.4 256:17.8", "baseline_assumed", ASSUMED, 0),
}  # fmt: skip


@pytest.mark.parametrize(
    ("probes", "source", "gamma", "points"), PROBE_CASES.values(), ids=PROBE_CASES
)
def test_fixed_lengths_fit_the_prefill_on_the_clients_probes(
    tmp_path: Path, probes: object, source: str, gamma: float, points: int
) -> None:
    fit = fit_capacity(analyze_run(write_run_dir(tmp_path / "run", run_info=_with_probes(probes))))
    assert fit.prefill_source == source
    prefill = fit.params.prefill_ms_per_token
    assert prefill.value == pytest.approx(gamma, abs=1e-12)
    assert len(fit.prefill_probes) == points
    if source == "probe_fit" and gamma > 0:  # exact probes: the interval is the slope itself
        assert (prefill.low, prefill.high) == pytest.approx((gamma, gamma))


#: case → (probes, the points the line goes through)
FASTEST_CASES = {
    "five lengths: the fastest of each": (
        [(256, 20.0), (64, 16.0), (1024, 40.0), (256, 18.0), (64, 19.0), (1024, 37.0),
         (128, 17.0), (512, 25.0)],
        ((64, 16.0), (128, 17.0), (256, 18.0), (512, 25.0), (1024, 37.0)),
    ),
    "a token or two apart is one length": (
        [(64, 16.0), (65, 15.5), (128, 17.0), (130, 17.5), (256, 18.0), (512, 25.0)],
        ((65, 15.5), (128, 17.0), (256, 18.0), (512, 25.0)),
    ),
    "three lengths: every probe, as sent": (
        [(256, 20.0), (128, 22.5), (512, 23.0), (256, 17.9), (128, 18.6)],
        ((256, 20.0), (128, 22.5), (512, 23.0), (256, 17.9), (128, 18.6)),
    ),
    "none": ([], ()),
}  # fmt: skip


@pytest.mark.parametrize(("probes", "kept"), FASTEST_CASES.values(), ids=FASTEST_CASES)
def test_the_prefill_line_goes_through_each_lengths_fastest(
    probes: list[tuple[float, float]], kept: tuple[tuple[float, float], ...]
) -> None:
    assert fastest_per_length(probes) == kept


def test_varying_lengths_fit_the_prefill_on_ttft(tmp_path: Path) -> None:
    # the rows' own TTFT wins over probes that say otherwise
    run = write_run_dir(
        tmp_path / "run", slots=SLOTS, run_info=_with_probes(_probes(64, 256, 512, per_token=0.2))
    )
    requests = pd.read_csv(run / "requests.csv")
    requests["prompt_tokens"] = [64 * (1 + i % 8) for i in range(len(requests))]
    requests["target_input_tokens"] = requests["prompt_tokens"]
    requests["ttft_ms"] = 5.0 + 0.05 * requests["prompt_tokens"]
    requests.to_csv(run / "requests.csv", index=False)
    fit = fit_capacity(analyze_run(run))
    assert fit.prefill_source == "ttft_fit" and fit.prefill_probes == ()
    assert fit.params.prefill_ms_per_token.value == pytest.approx(0.05)


def test_without_server_metrics_no_kv_budget_is_read(tmp_path: Path) -> None:
    analysis = analyze_run(write_run_dir(tmp_path / "run", with_server_metrics=False))
    fit = fit_capacity(analysis)
    assert fit.kv_source != "kv_gauge" and fit.kv_pct is None
    assert not fit.kv_gauge_read and not fit.models_memory
    assert fit.gauge_window is None and measured_run(analysis).gauge_window is None


def test_the_gauge_window_is_how_the_run_sampled_a_stage(tmp_path: Path) -> None:
    """A mix's predicted stage peak is read as often as the run read its gauge: the fixture's
    stages hold 6 s, 1 s of it warm-up, and its gauge is read every 0.5 s."""
    analysis = analyze_run(write_run_dir(tmp_path / "run", slots=SLOTS, stage_s=6.0))
    window = fit_capacity(analysis).gauge_window
    assert window is not None
    assert window.seconds == pytest.approx(5.0, abs=0.01)
    assert window.samples in (10, 11)  # 0.5 s apart over 5 s, both ends inclusive or not
    assert measured_run(analysis).gauge_window == window


@pytest.mark.parametrize(
    ("metrics", "stated_kv", "kv_source", "memory"),
    [
        (True, None, "kv_gauge", True),
        (True, 4096, "stated", True),  # a stated pool beside a gauge: the gauge still reads it
        (False, 4096, "stated", False),  # no gauge: the analysis judges no memory to mirror
        (False, None, "none", False),
    ],
)
def test_the_prediction_models_memory_only_where_the_run_had_a_kv_gauge(
    tmp_path: Path, metrics, stated_kv, kv_source, memory
) -> None:
    run = write_run_dir(tmp_path / "run", slots=SLOTS, with_server_metrics=metrics)
    fit = fit_capacity(analyze_run(run), stated_kv_tokens=stated_kv)
    assert (fit.kv_source, fit.kv_gauge_read, fit.models_memory) == (kv_source, metrics, memory)


def test_without_streamed_tokens_the_decode_line_comes_from_e2e_where_nothing_waited(
    tmp_path: Path,
) -> None:
    run = write_run_dir(tmp_path / "run", slots=SLOTS)
    requests = pd.read_csv(run / "requests.csv")
    for column in ("ttft_ms", "tpot_ms", "itl_mean_ms", "itl_p50_ms", "itl_p95_ms", "itl_max_ms"):
        requests[column] = float("nan")
    requests["stream"] = 0
    requests.to_csv(run / "requests.csv", index=False)
    analysis = analyze_run(run)
    fit = fit_capacity(analysis)
    assert (fit.decode_source, fit.prefill_source) == ("e2e_per_token", "in_step")
    # below the 6 slots every request takes 250 ms (± 10 %) for 32 tokens, whatever the batch
    summary = analysis.summary.set_index("target_users")
    assert fit.params.alpha_ms.value == pytest.approx(250.0 / OUTPUT, rel=0.05)
    assert fit.params.beta_ms.value == pytest.approx(0.0, abs=0.2)
    assert fit.max_batch <= SLOTS  # only the stages where nothing waited
    assert summary.loc[16, "e2e_p50_ms"] > 2 * 250.0  # the queued stage is left out


#: tokens a stream chunk carries → the figure the decode line is read from. Below the fixture's
#: 6 slots every token takes 7.4 ms: the chunk gap over the tokens in it, and TPOT (250 ms
#: ± 10 % less the 20 ms TTFT, over 31 tokens: 7.42 ms on the median request)
CHUNK_CASES = {"a token a chunk": (1, "itl"), "8 tokens a chunk": (8, "tpot")}


@pytest.mark.parametrize(("per_chunk", "source"), CHUNK_CASES.values(), ids=CHUNK_CASES)
def test_the_decode_line_is_per_token_however_many_tokens_a_chunk_carries(
    tmp_path: Path, per_chunk: int, source: str
) -> None:
    run = write_run_dir(tmp_path / "run", levels=(1, 2, 4), slots=SLOTS, tokens_per_chunk=per_chunk)
    fit = fit_capacity(analyze_run(run))
    assert (fit.decode_source, fit.tokens_per_chunk, fit.decode_points) == (source, per_chunk, 4)
    # within 3 % of a token's 7.4 ms (the median of ~100 requests' TPOT), not the chunk's 59.2
    assert fit.params.alpha_ms.value == pytest.approx(ITL_MS, rel=0.03)
    assert fit.params.beta_ms.value == pytest.approx(0.0, abs=0.1)  # the step ignores the batch
    said = decode_source_text(fit.decode_source, fit.tokens_per_chunk)
    assert said in prediction_text(predict(fit, fit.workload))  # the screen names the figure
    assert ("~8" in said) is (per_chunk == 8), said  # and, on TPOT, the tokens a chunk carried


#: the most tokens a decode stage's chunks carried → the line's figure (1.5: the rule's edge)
STEP_CASES = {
    "a token a chunk": ([1.0, 1.0, 1.02], "itl", 1.02),
    "at the edge": ([1.0, 1.5], "itl", 1.5),
    "just over": ([1.0, 1.6], "tpot", 1.6),
    "chunked at one stage (under load) reads TPOT throughout": ([1.0, 1.0, 8.0], "tpot", 8.0),
    "no chunk counted": ([math.nan, math.nan], "itl", None),
}  # fmt: skip


@pytest.mark.parametrize(("carried", "source", "most"), STEP_CASES.values(), ids=STEP_CASES)
def test_the_decode_line_reads_tpot_where_a_chunk_carried_several_tokens(
    carried: list[float], source: str, most: float | None
) -> None:
    assert decode_step(pd.DataFrame({"tokens_per_chunk": carried})) == (source, most)


@pytest.mark.parametrize("run", ["refuse10-hidden", "refuse20-metrics"])
def test_a_recorded_run_of_8_tokens_a_chunk_fits_its_own_single_user(run: str) -> None:
    """The refusing server sends 8 chunks 40 ms apart: 5 ms a token. Read as a token's step, the
    chunk gap made the model's 1-user e2e 6–7 times the run's; per token it is within the
    in-sample limit there. (Its prediction is still refused, rightly: the model charges a
    newcomer's prefill to every running sequence and this server's prefill stalls nobody, so the
    miss grows with the batch — +139 % at 8 users on refuse10-hidden.)"""
    fit = fit_capacity(analyze_run(BUSY / run))
    assert (fit.decode_source, fit.tokens_per_chunk) == ("tpot", 8.0)
    assert 4.0 <= fit.params.alpha_ms.value <= 5.5
    measured = dict(fit.measured_e2e_ms)[1]
    model = float(grid(Draws.point(fit.params), fit.workload, 1).e2e_ms[0, 0])
    assert abs(model - measured) / measured <= MISFIT_LIMIT, (model, measured)


@pytest.mark.parametrize(
    ("rate", "alpha", "beta", "capacity", "slots"),
    [
        # a 4-slot simulator's plateau, 12 % above the line's 308.6 tok/s at 4 (a fresh run's)
        (338.2, 10.07, 0.722, 4, 4.0),
        # a plateau exactly on the line at 4 slots
        (1000 * 4 / (10.07 + 4 * 0.722), 10.07, 0.722, 4, 4.0),
        # a noisy plateau a little below the line: the run's capacity holds
        (300.0, 10.07, 0.722, 4, 4.0),
        # 8 slots, 5 % over the line, the capacity read lower (a level grid of 1, 2, 4, 16)
        (1.05 * 1000 * 8 / (10.0 + 8 * 0.5), 10.0, 0.5, 4, 8.0),
        # no capacity: the line alone, never below one slot
        (50.0, 10.0, 0.5, None, 1.0),
        # a rate the line never gives (beyond 1000 / beta)
        (2500.0, 10.0, 0.5, 4, None),
    ],
)
def test_the_plateau_batch_rounds_down_and_keeps_the_runs_capacity(
    rate: float, alpha: float, beta: float, capacity: int | None, slots: float | None
) -> None:
    assert plateau_batch(rate, alpha, beta, capacity) == slots
