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


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_recorded_llama_run_is_refused_with_its_facts(capsys, fmt) -> None:
    assert main([str(LLAMA), "--output-tokens", "64", "--format", fmt]) == 3
    if fmt == "text":
        return
    p = json.loads(capsys.readouterr().out)["prediction"]
    assert (p["refusal"], p["point"]) == ("model_misfit", None)
    m = p["misfit"]
    assert m["users"] == 1 and m["miss"] > m["limit"] == MISFIT_LIMIT
    assert m["miss"] == pytest.approx((m["model_ms"] - m["measured_ms"]) / m["measured_ms"])
    assert dict(p["fit"]["measured_e2e_ms"])[1] == pytest.approx(m["measured_ms"])
