"""A late load generator in the knee's judgement and the answer's standing (issue 39, item 6).

A closed-form 6-slot server (:func:`tests.support.report_fixtures.write_run_dir`: levels 1-32,
knee at 8 users, answer 4) whose client.csv reports an event-loop lag at chosen levels. A late
stage is untrusted and cannot be the knee; one at or below the first level past the answer (or
at the baseline) makes the answer "cannot tell" (exit 3); one only above it leaves the answer as
it is; a run recorded before the lag was measured is judged as before. Asserted on the facts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.cli import main as analyze_main
from analysis.knee.facts import LateClientFact
from analysis.knee.late_client import LATE_CLIENT_MS, is_late_client
from analysis.pipeline import Analysis, analyze_run
from tests.support.report_fixtures import write_run_dir

LEVELS = (1, 2, 4, 8, 16, 32)


def _analyze(root: Path, lag: dict[int, float] | None) -> Analysis:
    return analyze_run(write_run_dir(root, levels=LEVELS, client_lag_ms=lag))


@pytest.fixture(scope="module")
def unlagged(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    """The same run recorded before the lag columns existed: the answer to compare with."""
    return _analyze(tmp_path_factory.mktemp("old"), None)


def _late_users(analysis: Analysis) -> list[int]:
    return [
        v.target_users
        for v in analysis.knee.stages
        for s in v.signals
        if s.name == "client_late" and s.fired
    ]


# lag by users → the late level stages, the standing, its late users, baseline late, first past
CASES = {
    "quiet: no stage late": ({}, [], "answer", (), False, None),
    "late at the first level past the answer": ({8: 120.0}, [8], "cannot_tell", (8,), False, 8),
    "late below the answer": ({2: 60.0}, [2], "cannot_tell", (2,), False, 8),
    "late at the baseline and the 1-user level": ({1: 80.0}, [1], "cannot_tell", (1,), True, 8),
    "late only above the first level past": ({32: 120.0}, [32], "answer", (), False, None),
    "over 10 % of the ~330 ms e2e P50 at 8": ({8: 40.0}, [8], "cannot_tell", (8,), False, 8),
    "under 10 % of it and under 50 ms": ({8: 30.0}, [], "answer", (), False, None),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_a_late_stage_is_untrusted_and_an_answer_it_could_move_is_cannot_tell(
    tmp_path: Path, unlagged: Analysis, case: str
) -> None:
    lag, late_levels, kind, standing_late, baseline_late, first_past = CASES[case]
    analysis = _analyze(tmp_path / "run", lag)
    knee, standing = analysis.knee, analysis.standing
    assert _late_users(analysis) == late_levels
    for v in knee.stages:
        late = v.target_users in late_levels
        if late:  # untrusted, never the knee, and its reasons carry the measured lag
            assert not v.trusted and v.verdict != "knee", v
            (fact,) = [r.fact for r in v.reasons if getattr(r, "name", "") == "client_late"]
            assert isinstance(fact, LateClientFact) and fact.late
            assert fact.lag_mean_ms == lag[v.target_users] and fact.users == v.target_users
            assert is_late_client(fact.lag_mean_ms, fact.e2e_p50_ms)
    assert (standing.kind, standing.reason) == (kind, "late_client" if late_levels and
                                                kind == "cannot_tell" else None)  # fmt: skip
    assert tuple(f.users for f in standing.late) == standing_late
    assert all(f.lag_mean_ms == lag[f.users] for f in standing.late)
    assert (standing.baseline_late is not None) == baseline_late
    if baseline_late:
        assert standing.baseline_late is not None and standing.baseline_late.lag_mean_ms == 80.0
    assert standing.first_past == first_past
    if kind == "answer":  # the answer is the one of the same run without any lag
        assert knee.max_concurrency == unlagged.knee.max_concurrency == 4
        assert knee.knee_users == unlagged.knee.knee_users == 8
        assert analysis.recommendations.deploy == unlagged.recommendations.deploy
    else:  # nothing is recommended from it
        assert analysis.recommendations.items == () and analysis.recommendations.deploy is None


def test_a_run_from_before_the_lag_is_judged_as_it_was(unlagged: Analysis) -> None:
    assert analysis_has_no_lag(unlagged)
    assert unlagged.standing.kind == "answer" and unlagged.standing.late == ()
    assert [v.verdict for v in unlagged.knee.stages] == [
        "comfortable", "comfortable", "comfortable", "knee", "critical", "critical"
    ]  # fmt: skip


def analysis_has_no_lag(analysis: Analysis) -> bool:
    """No stage carries a lag signal at all (not even one that did not fire)."""
    return all(s.name != "client_late" for v in analysis.knee.stages for s in v.signals)


def test_cannot_tell_from_a_late_client_exits_3_and_writes_the_lag_to_knee_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    run = write_run_dir(tmp_path / "run", levels=LEVELS, client_lag_ms={8: 120.0})
    assert analyze_main([str(run), "--quiet"]) == 3
    doc = json.loads((run / "report" / "knee.json").read_text())
    standing = doc["standing"]
    assert (standing["kind"], standing["reason"], standing["first_past"]) == (
        "cannot_tell", "late_client", 8
    )  # fmt: skip
    (late,) = standing["late"]
    assert (late["users"], late["lag_mean_ms"], late["limit_ms"]) == (8, 120.0, LATE_CLIENT_MS)
    written = {p.name for p in (run / "report").iterdir()}
    assert not written & {"keda-scaledobject.yaml", "hpa.yaml", "alerts.rules.yaml"}, written
    printed = capsys.readouterr()
    # words are the product: the screen's first line when it cannot tell (exit 3)
    assert printed.out.lstrip().startswith("cannot tell: the load generator ran late")
    assert "--processes" in printed.out and "120 ms" in printed.out


def test_a_late_stage_feeds_no_fit_and_a_cannot_tell_run_no_headroom(tmp_path: Path) -> None:
    """The latency profile's fits leave a late stage out (its ITL and TTFT are the client's),
    and a run that cannot tell allows no in-flight count for the traffic headroom."""
    from analysis.cluster.profile import decode_points, late_stages
    from analysis.traffic.headroom import run_capacity

    late = _analyze(tmp_path / "late", {8: 120.0})
    (stage,) = late_stages(late)
    assert late.summary.set_index("stage").at[stage, "target_users"] == 8
    points, _ = decode_points(late)
    assert 8 not in set(points["users"]) and {1, 2, 4} <= set(points["users"])
    capacity = run_capacity(late)
    assert (capacity.users, capacity.kind) == (None, "cannot_tell")
    above = _analyze(tmp_path / "above", {32: 120.0})
    assert run_capacity(above).users == 4 and run_capacity(above).kind == "knee"
