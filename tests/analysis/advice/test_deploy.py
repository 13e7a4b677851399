"""The one answer to deploy: the concurrency to configure and the limit that bound it."""

from __future__ import annotations

import pytest

from analysis.advice.deploy import binding_stage
from analysis.advice.facts import DeployFact, KneeWhyFact
from analysis.advice.recommend import recommend
from analysis.diagnosis.bottleneck import diagnose
from analysis.knee.find import KneeParams, find_knee
from analysis.stages.baseline import compute_baseline
from tests.support.knee_frames import seed_002_summary, sweep, twelve_slots

LEVELS = [4, 8, 16, 24, 32, 48]
TOK_S = [400, 800, 1500, 2100, 2600, 2650]
P95_MS = [900, 950, 1100, 1400, 1604, 3000]


def _recs(summary, **knee_params):
    baseline = compute_baseline(None, summary)
    knee = diagnose(summary, find_knee(summary, baseline, params=KneeParams(**knee_params)),
                    baseline)  # fmt: skip
    return knee, recommend(summary, knee, baseline)


def _summary(**columns):
    return sweep(LEVELS, TOK_S, P95_MS, baseline_tok_s=100.0, baseline_p95_ms=800.0, **columns)


def test_with_an_sla_the_answer_never_breaks_it():
    """--sla-ms 1500 printed max_concurrency 32 although 32 users had P95 1,604 ms."""
    summary = _summary()
    knee, recs = _recs(summary, sla_ms=1500)
    assert knee.max_concurrency == 32  # the stage before the knee at 48, blind to the SLA
    answer = recs.deploy
    assert answer is not None and answer.users == 24 and answer.bound == "sla"
    steps = summary[summary["kind"] == "step"]
    assert (steps[steps["target_users"] <= answer.users]["e2e_p95_ms"] <= 1500).all()
    stage = binding_stage(knee, answer.bound)  # the stage the answer stops before, and why
    assert stage is not None and stage.target_users == 32
    sla = next(s for s in stage.signals if s.name == "sla")
    assert (sla.fired, sla.value, sla.threshold) == (True, 1604, 1500)
    assert (knee.max_concurrency, knee.base_capacity) == (32, 24)
    assert recs.get("deploy_concurrency") == 24


def test_without_an_sla_the_knee_binds():
    knee, recs = _recs(_summary())
    assert knee.knee_users == 48
    assert recs.deploy is not None and (recs.deploy.users, recs.deploy.bound) == (32, "knee")


@pytest.mark.parametrize(
    ("columns", "users", "bound"),
    [
        ({"kv_cache_peak_pct": [20, 40, 60, 90, 95, 99]}, 16, "memory"),
        ({"errors": [0, 0, 0, 0, 2, 9], "ok": [100, 100, 100, 100, 98, 91]}, 24, "errors"),
    ],
)
def test_memory_and_errors_bind_below_the_knee(columns, users, bound):
    if "ok" in columns:
        columns["success_pct"] = [100 * o / (o + e) for o, e in zip(columns["ok"],
                                  columns["errors"], strict=True)]  # fmt: skip
    _, recs = _recs(_summary(**columns))
    assert recs.deploy is not None and (recs.deploy.users, recs.deploy.bound) == (users, bound)


def test_no_limit_in_range_says_sweep_higher():
    summary = sweep([1, 2, 4], [100, 200, 400], [100] * 3, baseline_tok_s=100.0,
                    baseline_p95_ms=100.0)  # fmt: skip
    _, recs = _recs(summary)
    assert recs.deploy is not None and recs.deploy.bound == "tested_range"
    assert recs.deploy.users == 4
    assert recs.deploy.fact == DeployFact("tested_range", top_users=4)


def test_the_vllm_chapter_table_deploys_before_its_knee():
    _, recs = _recs(seed_002_summary())
    # memory 85 % at 24 users is within "memory ≤ 85 %"; the knee at 32 binds
    assert recs.deploy is not None and (recs.deploy.users, recs.deploy.bound) == (24, "knee")


def test_the_answer_never_exceeds_the_knees_max_concurrency():
    """A refined sweep: 9 users is not yet a knee by the client's figures, 10 is, but the
    server's own counts capped max_concurrency at its 8 slots — deploy 8, not 9."""
    import dataclasses

    from analysis.advice.deploy import deploy_answer
    from analysis.model import KneeResult, StageVerdict

    def stage(i: int, users: int, verdict: str) -> StageVerdict:
        return StageVerdict(i, users, verdict, (), ())  # type: ignore[arg-type]

    stages = (stage(1, 2, "comfortable"), stage(2, 8, "comfortable"), stage(3, 9, "critical"),
              stage(4, 10, "knee"))  # fmt: skip
    knee = KneeResult(stages, 4, 10, None, None, 9, 9, "knee at 10 users")
    assert deploy_answer(None, knee).users == 9  # type: ignore[arg-type]
    capped = dataclasses.replace(knee, max_concurrency=8, server_slots=8)
    answer = deploy_answer(None, capped)  # type: ignore[arg-type]
    assert (answer.users, answer.bound) == (8, "knee")
    assert isinstance(answer.fact, DeployFact)
    assert (answer.fact.cap_users, answer.fact.server_slots) == (8, 8)


def test_a_knee_from_the_servers_queue_alone_says_so_not_that_the_tail_departed():
    # 12 slots: 16 users queue at the server while P95 is still 1.3× the baseline's
    summary = twelve_slots([800.0, 1150.0, 1400.0], [300.0, 320.0, 330.0])
    knee, recs = _recs(summary)
    assert knee.knee_users == 16
    answer = recs.deploy
    assert answer is not None and answer.bound == "knee"
    fact = answer.fact
    assert isinstance(fact, DeployFact) and fact.at_users == 16
    # the server's queue alone, not the curve; no departed tail anywhere in the answer
    assert fact.why == KneeWhyFact("server", curve=False)
    assert fact.tail_note is None and fact.departed_tail is None


def test_no_hard_knee_the_interactive_answer_is_below_the_departed_tail():
    """A compute-bound server: throughput still grows at 64 while the tail doubles near 32. The
    answer to deploy is the level before the tail left the single-user one, said as such."""
    levels = [2, 4, 8, 16, 24, 32, 48, 64]
    tok = [190.0, 370.0, 700.0, 1250.0, 1700.0, 2050.0, 2600.0, 3000.0]
    p95 = [700.0, 740.0, 820.0, 1000.0, 1200.0, 1500.0, 1900.0, 2300.0]
    summary = sweep(levels, tok, p95, baseline_tok_s=100.0, baseline_p95_ms=680.0)
    knee, recs = _recs(summary)
    assert knee.knee_users is None
    answer = recs.deploy
    assert answer is not None and answer.bound == "tail" and answer.users == 24
    fact = answer.fact
    assert isinstance(fact, DeployFact) and fact.kind == "no_hard_knee", fact
    assert (fact.users, fact.departed_users, fact.top_users) == (24, 32, 64)
    assert fact.departed_tail is not None and fact.departed_tail.fired


def test_an_answer_on_a_stage_whose_tail_departed_says_so():
    levels = [4, 8, 16, 24]
    summary = sweep(
        levels, [400.0, 790.0, 1500.0, 1540.0], [900.0, 1000.0, 1700.0, 4000.0],
        baseline_tok_s=100.0, baseline_p95_ms=800.0,
    )  # fmt: skip
    _, recs = _recs(summary)
    answer = recs.deploy
    assert answer is not None and answer.bound == "knee" and answer.users == 16
    fact = answer.fact
    assert isinstance(fact, DeployFact) and fact.tail_note is not None
    tail = fact.tail_note  # P95 1,700 ms at 16 users against the baseline's 800 ms
    assert (tail.name, tail.fired, tail.value) == ("tail_departure", True, 1700.0 / 800.0)


@pytest.mark.parametrize(
    ("queue", "users"),
    [
        ({}, 8),  # a soft knee: nothing queued; the level before the first departed tail
        # a hard knee: the server queued at 32, so the stage before the knee stands
        ({"running_mean": [4.0, 8.0, 16.0, 24.0, 24.0], "running_max": [4.0, 8.0, 16.0, 24.0, 24.0],
          "waiting_mean": [0.0, 0.0, 0.0, 0.0, 8.0]}, 24),
    ],
)  # fmt: skip
def test_a_soft_knee_never_deploys_above_the_first_departed_tail(queue, users):
    """Compute-bound: the tail doubled at 16 users, throughput flattened only at 32 (a knee by
    the curve, with nothing waiting): the answer to deploy is the level before the tail
    departed, as with no knee at all. With the server's queue at the knee it is a hard limit and the
    stage before it
    stands (its note says the tail had departed)."""
    summary = sweep(
        [4, 8, 16, 24, 32], [400.0, 790.0, 1500.0, 2200.0, 2300.0],
        [900.0, 1000.0, 1700.0, 2400.0, 3600.0], baseline_tok_s=100.0, baseline_p95_ms=800.0,
        **queue,
    )  # fmt: skip
    knee, recs = _recs(summary)
    assert knee.knee_users == 32, knee
    answer = recs.deploy
    assert answer is not None and answer.bound == "knee"
    assert answer.users == users, answer.fact
