"""The in-sample check: a model that cannot reproduce its own source run gives no number."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from analysis.predict.batching import Draws, grid
from analysis.predict.cli import main
from analysis.predict.facts import CapacityFit, CapacityParams, Estimate, Workload
from analysis.predict.insample import MISFIT_LIMIT, misfit, worst_miss
from analysis.predict.whatif import predict
from tests.support.paths import REPO
from tests.support.predict_fits import synthetic_fit

X = Estimate.exact
#: exact parameters, 8 slots: the run's capacity 8 at 256 + 64 tokens
EXACT = CapacityParams(X(10.0), X(0.5), X(0.02), 8.0, None)
#: the recorded llama-server run whose one-sequence fast path bends the step (README beside it)
LLAMA = REPO / "tests" / "support" / "data" / "real_runs" / "llama-parallel8"


def _model_ms(fit: CapacityFit, users: int) -> float:
    return float(grid(Draws.point(fit.params), fit.workload, users).e2e_ms[0, users - 1])


def _fit(misses: dict[int, float]) -> CapacityFit:
    """The synthetic fit whose run measured the model's e2e at each level, missed by
    ``misses[users]`` there: measured = model / (1 + miss)."""
    fit = synthetic_fit(EXACT)
    measured = tuple((u, _model_ms(fit, u) / (1.0 + m)) for u, m in sorted(misses.items()))
    return replace(fit, measured_e2e_ms=measured)


@pytest.mark.parametrize(
    ("misses", "worst_users", "refused"),
    [
        ({1: 0.0, 2: 0.0, 4: 0.0, 8: 0.0}, 1, False),  # the model is the run
        ({1: 0.02, 2: -0.05, 4: 0.20, 8: 0.1}, 4, False),  # under the limit everywhere
        ({1: 0.30, 2: 0.05, 4: 0.0, 8: 0.0}, 1, True),  # too slow alone (llama.cpp's fast path)
        ({1: 0.05, 2: -0.30, 4: 0.0, 8: 0.0}, 2, True),  # too fast at 2: a miss either way
        ({1: 0.0, 2: 0.0, 4: 0.0, 8: 0.26}, 8, True),  # the capacity itself is compared
        ({1: 0.0, 4: 0.1, 12: 3.0, 16: -0.9}, 4, False),  # past the capacity (8): queued, ignored
    ],
)
def test_the_worst_level_up_to_the_capacity_decides(misses, worst_users, refused) -> None:
    fit = _fit(misses)
    worst = worst_miss(fit)
    assert worst is not None and worst.users == worst_users
    assert worst.miss == pytest.approx(misses[worst_users])
    assert worst.model_ms == pytest.approx(_model_ms(fit, worst_users))
    assert worst.measured_ms == pytest.approx(worst.model_ms / (1 + misses[worst_users]))
    assert worst.limit == MISFIT_LIMIT
    assert (misfit(fit) == worst) is refused and (misfit(fit) is None) is not refused


@pytest.mark.parametrize(
    "fit",
    [
        synthetic_fit(EXACT),  # no judged level kept
        _fit({12: 3.0, 16: 3.0}),  # only levels past the capacity
        replace(_fit({1: 3.0}), measured_capacity=None),  # no capacity to compare up to
        replace(_fit({1: 3.0}), measured_e2e_ms=((1, 0.0),)),  # no latency measured
        replace(_fit({1: 3.0}), workload=Workload(float("nan"), float("nan"))),  # no lengths
    ],
)
def test_nothing_to_compare_is_no_check(fit: CapacityFit) -> None:
    assert worst_miss(fit) is None and misfit(fit) is None
    assert predict(fit, Workload(256, 128)).refusal is None


def test_a_model_that_misses_its_run_predicts_no_number() -> None:
    fits, misses = _fit({1: 0.0, 2: 0.0, 4: 0.0, 8: 0.0}), _fit({1: 0.3, 2: 0.0, 4: 0.0, 8: 0.0})
    point = predict(fits, Workload(256, 128)).point
    assert point is not None and point.users == 8  # the same parameters predict
    p = predict(misses, Workload(256, 128))
    assert (p.refusal, p.point, p.low, p.high, p.levels, p.check_levels) == (
        "model_misfit", None, None, None, (), ())  # fmt: skip
    assert p.misfit == worst_miss(misses)


def test_a_run_that_cannot_tell_is_refused_as_such_before_the_misfit() -> None:
    doubtful = replace(_fit({1: 0.5}), cannot_tell="unsure", measured_capacity=None)
    assert predict(doubtful, Workload(256, 64)).refusal == "source_cannot_tell"


#: the real sweep at twice the llama run's answer length, same server (README beside it)
LLAMA_TWICE = REPO / "tests" / "support" / "data" / "real_runs" / "llama-parallel8-twice-output"


def _shaped(offsets: tuple[tuple[float, float], ...], truth: tuple[tuple[float, float], ...]):
    """The synthetic fit whose run measured the model with the step shape ``truth`` (levels 1, 2,
    4, 8), carrying the offsets ``offsets``."""
    fit = synthetic_fit(EXACT)
    e2e = grid(Draws.point(fit.params, truth), fit.workload, 8).e2e_ms[0]
    measured = tuple((u, float(e2e[u - 1])) for u in (1, 2, 4, 8))
    return replace(fit, measured_e2e_ms=measured, step_offsets=offsets)


#: a server 3 ms a step faster alone than the line says (a one-sequence fast path)
FAST_ALONE = ((1.0, -3.0), (2.0, 0.0), (8.0, 0.0))


@pytest.mark.parametrize(
    ("offsets", "step_model", "refusal"),
    [
        (FAST_ALONE, "measured", None),  # the offsets the run measured reproduce it
        ((), "line", "model_misfit"),  # none kept: the line alone, refused
        (((1.0, 3.0), (2.0, 0.0), (8.0, 0.0)), "line", "model_misfit"),  # the wrong shape
    ],
)
def test_where_the_line_misses_the_measured_steps_may_stand_in(offsets, step_model, refusal):
    fit = _shaped(offsets, FAST_ALONE)
    line = worst_miss(fit)
    assert line is not None and line.users == 1 and line.miss > MISFIT_LIMIT
    p = predict(fit, Workload(256, 128))
    assert p.refusal == refusal and p.fit.step_model == step_model
    if refusal is None:
        assert p.point is not None and p.point.users is not None
        assert worst_miss(p.fit) is not None and abs(worst_miss(p.fit).miss) < 1e-9


def test_a_line_that_fits_keeps_the_line() -> None:
    fit = replace(_fit({1: 0.0, 2: 0.0, 4: 0.0, 8: 0.0}), step_offsets=FAST_ALONE)
    assert predict(fit, Workload(256, 128)).fit.step_model == "line"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_recorded_llama_run_predicts_on_its_measured_steps(capsys, fmt) -> None:
    """llama.cpp's one-sequence fast path: the line through the run's stages misses its own
    1-user median by over 25 %; the measured steps reproduce it, and the prediction at twice the
    answer length is what the real sweep at that length measured."""
    assert main([str(LLAMA), "--output-tokens", "64", "--format", fmt]) == 0
    if fmt == "text":
        return
    p = json.loads(capsys.readouterr().out)["prediction"]
    assert p["refusal"] is None and p["fit"]["step_model"] == "measured"
    line = worst_miss(replace(_llama_fit(p), step_model="line"))
    assert line is not None and line.users == 1 and line.miss > MISFIT_LIMIT


def _llama_fit(doc: dict) -> CapacityFit:
    from analysis.pipeline import analyze_run
    from analysis.predict.fit import fit_capacity

    fit = fit_capacity(analyze_run(LLAMA))
    assert [list(o) for o in fit.step_offsets] == doc["fit"]["step_offsets"]
    return fit


#: a second pair of real llama-server sweeps (same kind): its line misses its own 1-user median
#: by 24 %, just inside the limit, so only the better-fitting step catches the bend
LLAMA_SECOND = REPO / "tests" / "support" / "data" / "real_runs" / "llama-parallel8-second"
LLAMA_THIRD = REPO / "tests" / "support" / "data" / "real_runs" / "llama-parallel8-third"


def test_the_step_that_reproduces_the_run_better_runs_the_prediction() -> None:
    from analysis.pipeline import analyze_run
    from analysis.predict.fit import fit_capacity

    fit = fit_capacity(analyze_run(LLAMA_SECOND / "source"))
    line, shaped = worst_miss(fit), worst_miss(replace(fit, step_model="measured"))
    assert line is not None and shaped is not None
    assert abs(line.miss) <= MISFIT_LIMIT  # the line alone would not have been refused
    assert abs(shaped.miss) < abs(line.miss)
    assert predict(fit, Workload(32, 64)).fit.step_model == "measured"


@pytest.mark.parametrize(
    ("source", "other"),
    [
        (LLAMA, LLAMA_TWICE),
        (LLAMA_SECOND / "source", LLAMA_SECOND / "twice-output"),
        (LLAMA_THIRD / "source", LLAMA_THIRD / "twice-output"),
    ],
    ids=["first", "second", "third"],
)
def test_the_llama_prediction_checks_against_the_real_sweep(capsys, source, other) -> None:
    code = main(["--check", str(source), str(other), "--format", "json"])
    assert code == 0
    found = json.loads(capsys.readouterr().out)["check"]
    # the deploy answers: the third pair's knees sit elsewhere (its source's at 1, its
    # twice-output's at 4), which the prediction's offline batch is held against
    assert (found["measured"]["capacity"], found["measured"]["deploy_bound"]) == (1, "knee")
    assert found["prediction"]["point"]["users"] == 1
    assert found["deploy"]["error"] is not None and abs(found["deploy"]["error"]) <= 0.15
    assert found["deploy"]["inside"] is True


@pytest.mark.parametrize(
    ("run", "bound"),
    [
        (LLAMA, "slots"),  # its knee at 9 users, past the 8 slots
        (LLAMA_THIRD / "source", "compute"),  # its knee at 2 users: the step, not the slots
    ],
    ids=["first", "third"],
)
def test_llama_server_slots_come_from_the_engine_and_its_kv_holds_no_request_back(run, bound):
    from analysis.pipeline import analyze_run
    from analysis.predict.fit import fit_capacity

    fit = fit_capacity(analyze_run(run))
    # run.json's server.slots: llama-server's /props said 8 at pre-flight
    assert (fit.slot_source, fit.params.slots) == ("engine", 8.0)
    # without a KV gauge no budget is assumed from the knee: a longer prompt keeps the slots
    assert (fit.kv_source, fit.params.kv_tokens) == ("per_slot", None)
    assert fit.run_bound.bound == bound
    assert predict(fit, Workload(128, 32)).kv_slots is None


@pytest.mark.parametrize(
    ("server", "slots"),
    [
        ({"engine": "llama.cpp", "slots": 8}, 8),
        ({"engine": "llama.cpp"}, None),
        ({"slots": 0}, None),
        ({"slots": True}, None),
        ({"slots": "8"}, None),
        ("llama.cpp", None),
        (None, None),
    ],
)
def test_the_engines_own_slot_count_is_read_only_where_it_is_one(server, slots) -> None:
    from analysis.predict.fit import engine_slots

    assert engine_slots({} if server is None else {"server": server}) == slots
