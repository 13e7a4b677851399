"""SLO targets parsed from flags, files and presets; judged on the vLLM source's record table.

The verdicts are asserted as values (:mod:`analysis.slo.facts`); their words are pinned by the
golden file of :mod:`tests.analysis.report.test_golden_slo_words`."""

from __future__ import annotations

import argparse

import pytest

from analysis.advice.facts import SloAdviceFact
from analysis.advice.recommend import RecommendParams, recommend
from analysis.cli import build_parser
from analysis.knee.find import KneeParams, find_knee
from analysis.slo.advice import with_slo
from analysis.slo.evaluate import evaluate_slos
from analysis.slo.facts import CapacityDoubt, SloBreak
from analysis.stages.baseline import compute_baseline
from loadknee_core.slo_targets import PRESETS, Slo, SloParams, Threshold, parse_goodput, parse_slo
from tests.support.knee_frames import SEED_002_TABLE, seed_002_summary


def _params(*argv: str) -> SloParams:
    parser = build_parser()
    ns = parser.parse_args(["RUN", *argv])
    knee = KneeParams.from_cli_args(ns)
    return SloParams.from_cli_args(ns, sla_ms=knee.sla_ms, tail=knee.tail_percentile)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("ttft_p95_ms=500", Slo("ttft", 95.0, 500.0)),
        ("tpot_p99_ms=50", Slo("tpot", 99.0, 50.0)),
        ("itl_p95_ms=80.5", Slo("itl", 95.0, 80.5)),
        ("e2e_p99.9_ms=8000", Slo("e2e", 99.9, 8000.0)),
        ("s_per_1k_p95=4", Slo("s_per_1k", 95.0, 4.0)),
    ],
)
def test_slo_forms(text, want):
    assert parse_slo(text) == want


@pytest.mark.parametrize(
    "text", ["ttft_p95=500", "ttft_ms=500", "foo_p95_ms=1", "ttft_p95_ms=-1", "ttft_p95_ms=x"]
)
def test_malformed_slo_is_refused_with_the_forms_accepted(text):
    with pytest.raises(ValueError):
        parse_slo(text)


def test_goodput_thresholds_and_a_bad_one():
    assert parse_goodput("ttft_ms=500, tpot_ms=50,s_per_1k=2") == (
        Threshold("ttft", 500.0),
        Threshold("tpot", 50.0),
        Threshold("s_per_1k", 2.0),
    )
    with pytest.raises(ValueError, match="METRIC_ms=LIMIT"):
        parse_goodput("ttft_p95_ms=500")


def test_sla_ms_becomes_one_e2e_slo_at_the_knee_tail():
    assert _params("--sla-ms", "3000").slos == (Slo("e2e", 95.0, 3000.0),)
    assert _params("--sla-ms", "3000", "--knee-tail", "p99").slos == (Slo("e2e", 99.0, 3000.0),)
    assert not _params().given


@pytest.mark.parametrize("suffix", [".yaml", ".toml"])
def test_slo_file_yaml_or_toml_plus_flags(tmp_path, suffix):
    path = tmp_path / f"slo{suffix}"
    if suffix == ".yaml":
        path.write_text(
            "preset: interactive\nslo:\n  e2e_p99_ms: 8000\ngoodput:\n  ttft_ms: 400\n"
            "goodput_min_pct: 90\n"
        )
    else:
        path.write_text(
            'preset = "interactive"\ngoodput_min_pct = 90\n[slo]\ne2e_p99_ms = 8000\n'
            "[goodput]\nttft_ms = 400\n"
        )
    params = _params("--slo-file", str(path), "--slo", "ttft_p95_ms=300")
    # the flag replaces the preset's TTFT P95 500 ms; the file adds e2e P99
    assert set(params.slos) == {
        Slo("ttft", 95.0, 300.0),
        Slo("tpot", 95.0, 50.0),
        Slo("e2e", 99.0, 8000.0),
    }
    assert params.goodput == (Threshold("ttft", 400.0),)
    assert params.goodput_min_pct == 90.0
    assert params.sources and params.sources[0].startswith("interactive:")


def test_unknown_key_in_slo_file_is_refused(tmp_path):
    path = tmp_path / "slo.yaml"
    path.write_text("slos:\n  ttft_p95_ms: 500\n")
    with pytest.raises(ValueError, match="unknown keys"):
        _params("--slo-file", str(path))


def test_presets_print_their_numbers_and_source_in_help():
    help_text = " ".join(build_parser().format_help().split())
    for option in ("--slo ", "--goodput ", "--goodput-min-pct", "--slo-file", "--slo-preset"):
        assert option in help_text
    # words are the product: the --help a user reads
    assert "MLPerf Inference, Llama-2-70B server scenario" in help_text
    params = _params("--slo-preset", "mlperf-llama2-70b-interactive")
    assert params.slos == (Slo("ttft", 99.0, 450.0), Slo("tpot", 99.0, 40.0))
    assert set(PRESETS) >= {"interactive", "batch"}


def _seed_002(sla_ms: float):
    summary = seed_002_summary()
    baseline = compute_baseline(None, summary)
    knee = find_knee(summary, baseline)
    params = SloParams.from_cli_args(argparse.Namespace(), sla_ms=sla_ms, tail="p99")
    slo = evaluate_slos(summary, knee, params=params)
    return summary, baseline, knee, slo


@pytest.mark.parametrize(
    ("sla_ms", "capacity", "binding"),
    [(2000.0, 16, "latency"), (3000.0, 24, "latency"), (10000.0, 32, "throughput")],
)
def test_seed_002_table_with_an_e2e_slo_keeps_its_verdicts_and_adds_the_capacity(
    sla_ms, capacity, binding
):
    summary, baseline, knee, slo = _seed_002(sla_ms)
    assert [v.verdict for v in knee.stages] == [row[-1] for row in SEED_002_TABLE]
    assert knee.max_concurrency == 24
    assert slo is not None
    assert (slo.capacity, slo.binding) == (capacity, binding)
    # 48 users is the red line: never within the SLOs even where its P99 is unknown
    assert not slo.stages[-1].met and SloBreak("red_line") in slo.stages[-1].breaks
    first_broken = next(s for s in slo.stages if not s.met)
    assert first_broken.target_users == [4, 16, 24, 32, 48][[4, 16, 24, 32, 48].index(capacity) + 1]
    recs = with_slo(recommend(summary, knee, baseline), slo, knee)
    assert recs.get("slo_capacity") == capacity
    assert recs.get("binding_constraint") == binding
    assert recs.get("max_concurrency") == 24  # the knee's answer stays beside it
    assert recs.get("interactive_max_concurrency") == min(19, capacity)


def test_seed_002_breaks_name_the_slo_and_by_how_much():
    _, _, _, slo = _seed_002(2000.0)
    assert slo is not None
    stage_24 = slo.stages[2]
    (broken,) = stage_24.breaks
    assert broken.kind == "over" and broken.check is not None
    assert broken.check.slo == Slo("e2e", 99.0, 2000.0)
    assert (broken.check.value, broken.check.over_pct) == pytest.approx((2800.0, 40.0))
    assert (slo.capacity, slo.binding, slo.first_broken) == (16, "latency", stage_24)


def test_replicas_follow_the_binding_constraint():
    summary, baseline, knee, slo = _seed_002(2000.0)
    params = RecommendParams(target_concurrency=100)
    plain = recommend(summary, knee, baseline, params=params)
    assert plain.get("replicas") == 6  # 100 / 19 users per replica at the watermark
    recs = with_slo(plain, slo, knee, params)
    assert recs.get("replicas") == 7  # latency-bound: 100 / 16 users per replica


@pytest.mark.parametrize(
    ("deploy_users", "capacity", "expected", "bound"),
    [
        (8, 16, 8, "knee"),  # the SLOs have headroom: the knee's answer stands
        (8, 8, 8, "knee"),
        (16, 4, 4, "sla"),  # the SLOs bind below the knee: the answer never breaks them
        (16, None, None, "sla"),  # no tested stage met them
    ],
)
def test_the_answer_to_deploy_never_breaks_an_slo(
    deploy_users: int, capacity: int | None, expected: int | None, bound: str
) -> None:
    from analysis.advice.facts import DeployAnswer, DeployFact
    from analysis.slo.advice import _deploy_within_slo
    from analysis.slo.evaluate import SloResult

    answer = DeployAnswer(deploy_users, "knee", "configure … bound by the knee")
    slo = SloResult(SloParams(slos=(Slo("ttft", 95.0, 500.0),)), (), (), capacity, 8, "latency")
    got = _deploy_within_slo(answer, slo)
    assert got is not None
    assert (got.users, got.bound) == (expected, bound)
    if bound == "sla":
        assert got.fact == DeployFact(
            "slo_bound" if expected is not None else "slo_none",
            users=expected,
            batch_users=deploy_users if expected is not None else None,
            slo_limits=SloParams(slos=(Slo("ttft", 95.0, 500.0),)),
        )


@pytest.mark.parametrize(
    ("noisy_users", "wanted"),
    [
        ((), None),  # every stage trusted: no doubt
        ((4,), None),  # a noisy stage away from the capacity does not matter
        ((24,), CapacityDoubt(breaker_noisy_users=24)),  # the break may be one request
        ((16,), CapacityDoubt(setter_noisy_users=16)),  # the pass may be luck
    ],
)
def test_the_slo_capacity_says_when_a_noisy_stage_decides_it(noisy_users, wanted):
    import dataclasses

    summary = seed_002_summary()
    knee = find_knee(summary, compute_baseline(None, summary))
    knee = dataclasses.replace(
        knee,
        stages=tuple(
            dataclasses.replace(v, noisy=v.target_users in noisy_users) for v in knee.stages
        ),
    )
    params = SloParams.from_cli_args(argparse.Namespace(), sla_ms=2000.0, tail="p99")
    slo = evaluate_slos(summary, knee, params=params)
    assert slo is not None and slo.capacity == 16  # the figure itself never moves
    assert slo.doubt == wanted
    if wanted is None:
        return
    recs = with_slo(recommend(summary, knee, compute_baseline(None, summary)), slo, knee)
    capacity_item = next(i for i in recs.items if i.key == "slo_capacity")
    # the recommendations carry the doubt too
    assert isinstance(capacity_item.reason, SloAdviceFact)
    assert capacity_item.reason.doubt == slo.doubt


def test_a_stage_passing_again_above_the_break_is_named():
    from analysis.slo.evaluate import StageSlo, capacity_doubt

    def stage(users: int, met: bool) -> StageSlo:
        return StageSlo(users, users, met, (), () if met else (SloBreak("red_line"),),
                        None, None, None, None, None)  # fmt: skip

    summary = seed_002_summary()
    knee = find_knee(summary, compute_baseline(None, summary))
    stages = (stage(1, True), stage(2, True), stage(4, False), stage(8, True), stage(16, False))
    assert capacity_doubt(stages, knee) == CapacityDoubt(passes_again_users=(8,))
    assert capacity_doubt(stages[:3], knee) is None


@pytest.mark.parametrize(
    ("parameters", "wanted"),
    [
        (
            {"llm_slo": "ttft_p95_ms=500,tpot_p95_ms=50"},
            (Slo("ttft", 95.0, 500.0), Slo("tpot", 95.0, 50.0)),
        ),
        ({"llm_slo": " e2e_p99_ms=8000 , "}, (Slo("e2e", 99.0, 8000.0),)),
        ({"llm_slo": ""}, ()),
        ({}, ()),
        ({"llm_slo": "ttft_p95=500"}, ()),  # malformed: refused before load, ignored here
    ],
)
def test_the_sweeps_slos_are_read_from_run_json(parameters: dict, wanted: str) -> None:
    from loadknee_core.slo_targets import run_slo_params

    assert run_slo_params({"parameters": parameters}) == SloParams(slos=wanted)


def test_a_malformed_sweep_slo_is_refused_before_load() -> None:
    from loadknee_locust.plugin.options import LlmOptions
    from loadknee_locust.plugin.validate import option_problems

    assert option_problems(LlmOptions(slo="ttft_p95_ms=500,tpot_p95_ms=50")) == []
    problems = option_problems(LlmOptions(slo="ttft_p95_ms=500,ttft_ms=9"))
    assert len(problems) == 1 and "--llm-slo (--slo)" in problems[0]
    assert "METRIC_pNN_ms=LIMIT" in problems[0]


def test_a_break_by_a_fraction_of_a_percent_does_not_read_as_none() -> None:
    from analysis.slo.evaluate import _check

    check = _check(parse_slo("e2e_p95_ms=760"), 761.8)
    assert not check.met and check.over_pct == pytest.approx(0.2368, abs=1e-4)
    assert _check(parse_slo("e2e_p95_ms=500"), 856.0).over_pct == pytest.approx(71.2)
    assert _check(parse_slo("e2e_p95_ms=500"), 500.0).over_pct is None  # at the limit: met


def test_a_red_line_break_leaves_no_doubt_even_on_a_noisy_stage():
    """The knee's red-line verdict, not the words of a break, says the break is certain."""
    import dataclasses

    from analysis.slo.evaluate import StageSlo, capacity_doubt

    summary = seed_002_summary()
    knee = find_knee(summary, compute_baseline(None, summary))
    first = knee.stages[0]
    red = next(v for v in knee.stages if v.verdict == "red_line")
    plain = next(v for v in knee.stages if v.verdict == "critical")
    noisy = {red.stage, plain.stage}
    knee = dataclasses.replace(
        knee, stages=tuple(dataclasses.replace(v, noisy=v.stage in noisy) for v in knee.stages)
    )

    def judged(verdict, met: bool) -> StageSlo:
        breaks = () if met else (SloBreak("red_line"),)
        return StageSlo(verdict.stage, verdict.target_users, met, (), breaks,
                        None, None, None, None, None)  # fmt: skip

    assert capacity_doubt((judged(first, True), judged(red, False)), knee) is None
    assert capacity_doubt((judged(first, True), judged(plain, False)), knee) == CapacityDoubt(
        breaker_noisy_users=plain.target_users
    )
