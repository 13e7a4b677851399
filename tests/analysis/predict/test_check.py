"""``predict --check``: a prediction against what a second run measured (facts, not words)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest

from analysis.pipeline import analyze_run
from analysis.predict.check import check, measured_run
from analysis.predict.cli import main
from analysis.predict.facts import CapacityParams, Check, Estimate, MeasuredRun, Workload
from analysis.predict.fit import fit_capacity
from analysis.predict.whatif import predict
from analysis.report.predict_words import prediction_text
from tests.support.predict_fits import synthetic_fit
from tests.support.report_fixtures import write_run_dir

X = Estimate.exact
#: exact parameters, 8 slots: the prediction at 256 + 64 tokens is 8 users, interval 8–8
SLOTS8 = synthetic_fit(CapacityParams(X(10.0), X(0.5), X(0.02), 8.0, None))


def _measured(capacity: int | None, past: int | None) -> MeasuredRun:
    levels = (1, 2, 4, 6, 12, 16)
    return MeasuredRun("other", Workload(256, 64), "rows", capacity, past, levels, ((1, 700.0),))


@pytest.mark.parametrize(
    ("capacity", "past", "span", "inside", "error", "raw"),
    [
        (6, 12, (6, 11), True, 0.0, 2 / 6),  # 8 lies within what the levels allow
        (8, 12, (8, 8), True, 0.0, 0.0),  # no tested level: a gauge set it, exactly
        (3, 4, (3, 3), False, 5 / 3, 5 / 3),
        (4, 6, (4, 5), False, 3 / 4, 1.0),  # past the span's top, over the capacity 4
        (12, 16, (12, 15), False, -1 / 3, -1 / 3),
        (16, None, (16, None), False, -0.5, -0.5),  # the top level, not reached: 16 or more
        (None, 1, (None, 0), None, None, None),  # the first level already broke
    ],
)
def test_the_capacity_is_compared_with_the_span_the_runs_levels_allow(
    capacity, past, span, inside, error, raw
) -> None:
    c = check(SLOTS8, _measured(capacity, past))
    assert (c.prediction.point.users, c.prediction.low, c.prediction.high) == (8, 8, 8)
    d = c.deploy
    assert (d.measured_low, d.measured_high) == span
    assert d.inside is inside
    if error is None:
        assert d.error is None and d.raw_error is None
    else:
        assert (d.error, d.raw_error) == (pytest.approx(error), pytest.approx(raw))


#: exact parameters, no hard limit: at 256 + 64 tokens the tail doubles past 10 users (the
#: deploy figure 10) and the throughput flattens past 14 (the offline batch 14)
NO_LIMIT = synthetic_fit(CapacityParams(X(10.0), X(1.0), X(0.05), None, None))


@pytest.mark.parametrize(
    ("deploy", "knee", "deploy_inside", "offline_inside"),
    [
        ((8, 12), (12, 16), True, True),  # deploy 10 within 8–11, offline 14 within 12–15
        ((12, 16), (12, 16), False, True),  # a run whose deploy answer were its knee
        ((8, 12), (8, 12), True, False),  # a run whose knee were its deploy answer
    ],
)
def test_the_deploy_figure_meets_the_deploy_answer_and_the_offline_batch_the_knee(
    deploy, knee, deploy_inside, offline_inside
) -> None:
    measured = dataclasses.replace(
        _measured(*deploy), levels=WIDE, knee_capacity=knee[0], knee_past_users=knee[1]
    )
    c = check(NO_LIMIT, measured)
    point = c.prediction.point
    assert (point.users, point.offline_users) == (10, 14)
    assert c.deploy.inside is deploy_inside
    assert c.offline.inside is offline_inside
    assert (c.offline.measured_low, c.offline.measured_high) == (knee[0], knee[1] - 1)


def test_a_measured_run_that_cannot_tell_has_no_capacity_to_compare() -> None:
    unknown = dataclasses.replace(_measured(None, None), cannot_tell="tail_in_doubt")
    c = check(SLOTS8, unknown)
    assert c.prediction.point.users == 8  # the prediction stands: the other run has no number
    d = c.deploy
    assert (d.measured_low, d.measured_high, d.inside, d.error, d.raw_error) == (None,) * 5
    assert [lv.users for lv in c.levels] == [1]  # the latency per level is still compared


def test_each_measured_level_gets_the_models_e2e_against_its_p95() -> None:
    c = check(SLOTS8, _measured(8, 12))
    (level,) = c.levels
    assert level.users == 1 and level.measured_p95 == 700.0 and level.metric == "e2e_ms"
    assert level.error == pytest.approx((level.predicted - 700.0) / 700.0)
    assert level.inside is (level.low <= 700.0 <= level.high)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    """Run directories of the fixture server with a given slot count, on given levels; one
    engine whose steps run the prefills they admit, as the model has it (``prefill_stalls``:
    without, the model misses its 12-slot run by over a third and refuses)."""
    root = tmp_path_factory.mktemp("check")
    made: dict[tuple[int, tuple[int, ...]], Path] = {}

    def run(slots: int, levels: tuple[int, ...] = (1, 2, 4, 8, 16)) -> Path:
        key = (slots, levels)
        if key not in made:
            made[key] = write_run_dir(
                root / f"s{slots}-{len(levels)}", slots=slots, levels=levels, prefill_stalls=True
            )
        return made[key]

    return run


WIDE = (1, 2, 4, 8, 12, 16, 24)


def test_a_deploy_answer_bound_by_what_the_model_does_not_judge_is_held_by_the_knee(runs):
    # the fixture server on the wide levels: memory passes 85 % at 12 users, so its deploy
    # answer is 8 (memory) while its knee is 12; held for a prediction that models no memory
    # (check() holds it again for one that does)
    m = measured_run(analyze_run(runs(12, WIDE)))
    assert m is not None
    assert (m.deploy_users, m.deploy_bound, m.deploy_past_users) == (8, "memory", 12)
    assert (m.capacity, m.past_users) == (12, 16) == (m.knee_capacity, m.knee_past_users)
    # on the narrow levels the knee binds the deploy answer itself, and both agree
    m = measured_run(analyze_run(runs(12)))
    assert m is not None
    assert (m.deploy_users, m.deploy_bound, m.capacity, m.knee_capacity) == (8, "knee", 8, 8)


#: how the source's KV budget came → (the prediction judges memory, its deploy figure and what
#: ended it, the measured figure it is held against and the stage past it, against the knee)
KV_SOURCES = {
    # the gauge reads 90 % with the 12 slots full: 11 users, as the run's deploy answer (8,
    # bound by memory at 12) allows (8–11); without the memory bound it would say 12
    "gauge": ({}, (True, 11, "memory", 8, 12, False)),
    "a stated pool beside the gauge": ({"kv_source": "stated"}, (True, 11, "memory", 8, 12, False)),
    # no gauge: no memory predicted, so the memory-bound answer is held against the knee
    "a stated pool, no gauge": (
        {"kv_source": "stated", "kv_gauge_read": False},
        (False, 12, "flattening", 12, 16, True),
    ),
    "assumed from the knee": (
        {"kv_source": "knee_assumed", "kv_gauge_read": False},
        (False, 12, "flattening", 12, 16, True),
    ),
}


@pytest.mark.parametrize(("changes", "expected"), KV_SOURCES.values(), ids=KV_SOURCES)
def test_a_memory_bound_deploy_answer_is_held_by_a_prediction_that_models_memory(
    runs, changes, expected
) -> None:
    fit = dataclasses.replace(fit_capacity(analyze_run(runs(12))), **changes)
    other = analyze_run(runs(12, WIDE))
    m = measured_run(other)
    assert m is not None and (m.deploy_users, m.deploy_bound) == (8, "memory")
    c = check(fit, m, other.knee_params)
    point = c.prediction.point
    held = (c.measured.capacity, c.measured.past_users, c.deploy_against_knee)
    assert (fit.models_memory, point.users, point.ends_with, *held) == expected
    assert c.deploy.inside is True and c.deploy.error == 0.0
    assert (c.offline.measured, point.offline_users) == (12, 12)  # the knee: memory aside


@pytest.mark.parametrize(
    ("source", "other", "inside", "sign"),
    [
        ((6, None), (6, None), True, 0),  # a run against itself
        ((12, None), (12, WIDE), True, 0),  # the same server swept on other levels
        ((6, None), (12, None), False, -1),  # twice the slots: it measured more
        ((6, None), (3, None), False, +1),  # half the slots: it measured less
    ],
)
def test_checked_against_real_run_directories(runs, source, other, inside, sign) -> None:
    def path(spec: tuple[int, tuple[int, ...] | None]) -> Path:
        slots, levels = spec
        return runs(slots) if levels is None else runs(slots, levels)

    other_analysis = analyze_run(path(other))
    measured = measured_run(other_analysis)
    assert measured is not None and measured.workload_source == "rows"
    c = check(fit_capacity(analyze_run(path(source))), measured, other_analysis.knee_params)
    assert c.deploy.inside is inside
    assert c.deploy.error is not None
    if sign == 0:
        assert c.deploy.error == pytest.approx(0.0)
    else:
        assert c.deploy.error * sign > 0.2
    # every step level of the other run is compared
    assert tuple(lv.users for lv in c.levels) == (other[1] or (1, 2, 4, 8, 16))


def test_a_source_the_model_cannot_reproduce_gives_no_number_to_check(runs, tmp_path, capsys):
    # the fixture server whose prefills cost the batch nothing: at 8 users the model (which
    # charges each step the prefills it admits) misses the run's own median e2e by over 25 %
    free = write_run_dir(tmp_path / "free", slots=12)
    assert main(["--check", str(free), str(runs(12)), "--format", "json"]) == 3
    c = json.loads(capsys.readouterr().out)["check"]
    p = c["prediction"]
    assert (p["refusal"], p["point"], c["deploy"]["inside"], c["levels"]) == (
        "model_misfit",
        None,
        None,
        [],
    )
    assert p["misfit"]["users"] == 8 and p["misfit"]["miss"] > p["misfit"]["limit"]
    assert main(["--check", str(runs(12)), str(runs(12)), "--format", "json"]) == 0


def test_no_counted_tokens_take_the_lengths_from_run_json(tmp_path: Path) -> None:
    run = write_run_dir(tmp_path / "run", slots=6)
    requests = pd.read_csv(run / "requests.csv")
    requests["prompt_tokens"] = float("nan")
    requests["completion_tokens"] = float("nan")
    requests.to_csv(run / "requests.csv", index=False)
    measured = measured_run(analyze_run(run))
    assert measured is not None and measured.workload_source == "run_json"
    assert measured.workload == Workload(128, 32)
    info = json.loads((run / "run.json").read_text())
    del info["prompt_source"]
    (run / "run.json").write_text(json.dumps(info))
    assert measured_run(analyze_run(run)) is None
    assert main(["--check", str(run), str(run)]) == 2


def test_a_replayed_logs_run_is_predicted_at_its_rows_mix(tmp_path: Path) -> None:
    """A run whose lengths vary (a replayed log) is checked at its rows' mix — the records
    themselves for the KV peak, the time-weighted context — not at its mean lengths."""
    run = write_run_dir(tmp_path / "run", slots=6)
    fixed = measured_run(analyze_run(run))
    assert fixed is not None and fixed.workload == Workload(128, 32)  # fixed: the means
    requests = pd.read_csv(run / "requests.csv")
    requests["prompt_tokens"] = [32 * (1 + i % 8) for i in range(len(requests))]
    requests["completion_tokens"] = [8 * (1 + i % 5) for i in range(len(requests))]
    requests.to_csv(run / "requests.csv", index=False)
    measured = measured_run(analyze_run(run))
    assert measured is not None
    w = measured.workload
    assert w.lengths and {i for i, _ in w.lengths} <= {32.0 * k for k in range(1, 9)}
    assert w.context_tokens is not None and w.context_tokens > w.input_tokens + w.output_tokens


def _one_line(err: str) -> bool:
    err = err.strip()
    return err.startswith("loadknee predict:") and "\n" not in err


def test_the_check_as_json_round_trips_with_its_fields(runs, capsys) -> None:
    assert main(["--check", str(runs(6)), str(runs(12)), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"schema", "check"}
    body = doc["check"]
    assert set(body) == {f.name for f in dataclasses.fields(Check)}
    assert doc["schema"] == 2
    assert body["deploy"]["inside"] is False and body["deploy"]["measured_low"] == 8
    # 5, not the 6 slots: the fixture's KV gauge reads 90 % with them full, past 85 %
    assert body["prediction"]["point"]["users"] == 5
    assert body["measured"]["workload"] == {
        "input_tokens": 128.0,
        "output_tokens": 32.0,
        "context_tokens": None,
    }
    assert [lv["users"] for lv in body["levels"]] == [1, 2, 4, 8, 16]


def test_the_prediction_as_json_round_trips(runs, capsys) -> None:
    assert main([str(runs(6)), "--output-tokens", "64", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"schema", "prediction"}
    assert doc["prediction"]["workload"] == {
        "input_tokens": 128.0,
        "output_tokens": 64.0,
        "context_tokens": None,
    }
    assert doc["prediction"]["point"]["users"] >= 1


def test_the_runs_may_come_before_or_after_the_flag(runs) -> None:
    assert main(["--check", str(runs(6)), str(runs(6))]) == 0
    assert main([str(runs(6)), "--check", str(runs(6))]) == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["--check", "A"],  # one run
        ["A", "B"],  # two runs without --check
        ["--check", "A", "B", "--input-tokens", "64"],  # lengths come from B
        ["A", "--format", "yaml"],
    ],
)
def test_wrong_arguments_are_one_line_and_exit_2(argv, capsys) -> None:
    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert raised.value.code == 2
    assert _one_line(capsys.readouterr().err)


def test_a_missing_other_run_is_one_line_and_exit_2(runs, tmp_path: Path, capsys) -> None:
    assert main(["--check", str(runs(6)), str(tmp_path / "nope")]) == 2
    assert _one_line(capsys.readouterr().err)


@pytest.fixture(scope="module")
def late_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose load generator ran late from 4 users on: ``loadknee analyze`` cannot tell."""
    lag = {1: 2.0, 2: 2.0, 4: 400.0, 8: 400.0, 16: 400.0}
    run = write_run_dir(tmp_path_factory.mktemp("late") / "run", slots=6, client_lag_ms=lag)
    assert analyze_run(run).standing.reason == "late_client"
    return run


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_no_prediction_from_a_run_that_cannot_tell(late_run: Path, capsys, fmt) -> None:
    # analyze exits 3 with no capacity on this run; predict at its own lengths must not give one
    assert main([str(late_run), "--format", fmt]) == 3
    out = capsys.readouterr().out
    if fmt == "json":
        p = json.loads(out)["prediction"]
        assert p["refusal"] == "source_cannot_tell" and p["point"] is None
        assert p["fit"]["cannot_tell"] == "late_client"
        assert p["fit"]["measured_capacity"] is None
    else:  # the screen is the refusal's words (pinned in the predict_words golden)
        fit = fit_capacity(analyze_run(late_run))
        assert out.rstrip("\n") == prediction_text(predict(fit, fit.workload))


def test_a_check_with_a_run_that_cannot_tell_on_either_side_exits_3(runs, late_run, capsys):
    assert main(["--check", str(late_run), str(runs(6)), "--format", "json"]) == 3
    c = json.loads(capsys.readouterr().out)["check"]
    assert c["prediction"]["refusal"] == "source_cannot_tell" and c["levels"] == []
    assert main(["--check", str(runs(6)), str(late_run), "--format", "json"]) == 3
    c = json.loads(capsys.readouterr().out)["check"]
    assert c["prediction"]["point"]["users"] == 5  # memory: the KV gauge at 90 % on 6 slots
    assert c["measured"]["cannot_tell"] == "late_client" and c["measured"]["capacity"] is None
    assert c["deploy"]["inside"] is None and [lv["users"] for lv in c["levels"]] == [1, 2, 4, 8, 16]


def test_a_length_mix_is_checked_on_its_slowdown_not_its_p95_e2e() -> None:
    # the same levels both ways: a mix's checking run holds its P95 slowdown per level too
    e2e = dataclasses.replace(_measured(8, 12), p95_e2e_ms=((1, 700.0), (4, 900.0), (16, 3e3)))
    mix = dataclasses.replace(e2e, p95_slowdown=((1, 1.02), (4, 1.3), (16, 4.0)))
    by_ms, by_slowdown = check(SLOTS8, e2e).levels, check(SLOTS8, mix).levels
    assert [lv.metric for lv in by_ms] == ["e2e_ms"] * 3
    assert [lv.metric for lv in by_slowdown] == ["slowdown"] * 3
    one = by_ms[0].predicted
    for ms, ratio, measured in zip(by_ms, by_slowdown, (1.02, 1.3, 4.0), strict=True):
        # the model's e2e over its e2e at one user, against the run's P95 slowdown
        assert ratio.predicted == pytest.approx(ms.predicted / one, rel=1e-12)
        assert ratio.measured_p95 == measured
        assert ratio.error == pytest.approx((ratio.predicted - measured) / measured)
        assert ratio.low <= ratio.predicted <= ratio.high
    assert by_slowdown[0].predicted == pytest.approx(1.0)
    assert by_slowdown[0].low == pytest.approx(1.0) and by_slowdown[0].high == pytest.approx(1.0)
    # 16 users on 8 slots: half of them wait a whole request, the model's e2e doubles at least
    assert by_slowdown[2].predicted >= 2.0


def test_a_replayed_logs_run_holds_its_p95_slowdown_per_level() -> None:
    run = Path(__file__).parents[2] / "support" / "data" / "sim_runs" / "compute-bound-lognormal"
    measured = measured_run(analyze_run(run))
    assert measured is not None
    slowdown = dict(measured.p95_slowdown)
    assert sorted(slowdown) == [1, 2, 4, 8, 16, 24, 32, 48, 64]
    assert slowdown[1] == pytest.approx(1.0, abs=0.01) and slowdown[32] > 2.0
