"""An answer that counts a flattened level with a tail in the noise of 2x as "before the knee",
above the fit's capacity interval, is "cannot tell" (issue 39), on values.

The case behind it (ci33): a recorded 4-slot drive without /metrics, its baseline 6 requests
(P50 280 ms, P95 316 ms: one slow request), 8 users' P95 620 ms = 1.96x: "held", so the knee
went to 16 users and the answer to 8, with every resample agreeing (the stages were too short
for an interval) while the fit over all stages said 4 (90 % interval 3-4). Twice the slots
puts the tail on the 2x line by construction: which side of it a run lands on is noise.
"""

from __future__ import annotations

import pytest

from analysis.advice.facts import DeployAnswer, Recommendations
from analysis.advice.standing import answer_standing, tail_in_doubt
from analysis.knee.find import find_knee
from analysis.knee.signals import tail_undecided
from analysis.knee.stage_verdict import signal_of
from analysis.report import html_answer
from analysis.report.answer_view import answer_view, capacity_words, mark_labels
from analysis.report.standing import cannot_tell_text
from analysis.stages.baseline import compute_baseline
from tests.support.golden import check_golden
from tests.support.knee_frames import frame, stage

#: the 4-slot drive's levels and their output tok/s (a quiet recording's figures)
LEVELS = [1, 2, 4, 8, 16]
TOK_S = [93.9, 174.0, 317.0, 327.0, 346.0]


def _knee(base_p50: float, base_p95: float, p95_at_8: float, levels: list[int] = LEVELS):
    """A baseline of 6 requests, then the levels (P95 at 8 users ``p95_at_8``, twice it at 16)."""
    rows = [stage(1, kind="baseline", output_tok_s=93.1, e2e_p50_ms=base_p50,
                  e2e_p95_ms=base_p95, e2e_p99_ms=base_p95, ok=6, requests=6)]  # fmt: skip
    tails = {1: base_p95, 2: 300.0, 4: 330.0, 8: p95_at_8, 16: 2 * p95_at_8}
    for users in levels:
        tail, served = tails[users], 6 if users == 1 else 20
        rows.append(stage(users, output_tok_s=TOK_S[LEVELS.index(users)], e2e_p50_ms=0.95 * tail,
                          e2e_p95_ms=tail, ok=served, requests=served))  # fmt: skip
    summary = frame(rows)
    return find_knee(summary, compute_baseline(None, summary))


@pytest.mark.parametrize(
    ("base_p50", "base_p95", "p95_at_8", "answer", "kind", "why"),
    [
        (280.0, 316.0, 620.0, 8, "cannot_tell", "ci33: 1.96x held, up to 2.21x, fit 4"),
        (258.0, 259.0, 591.0, 4, "answer", "a quiet baseline: 2.28x departed, the knee at 8"),
        (280.0, 316.0, 700.0, 4, "answer", "2.22x by the point figure: departed, no doubt"),
        (280.0, 316.0, 400.0, 8, "answer", "1.27x, up to 1.43x: held, not in doubt"),
        (316.0, 316.0, 620.0, 8, "answer", "no spread in the baseline: 1.96x is held"),
    ],
)
def test_a_flattened_level_with_its_tail_in_the_noise_above_the_fit_is_cannot_tell(
    base_p50, base_p95, p95_at_8, answer, kind, why
):
    knee = _knee(base_p50, base_p95, p95_at_8)
    assert knee.max_concurrency == answer, why
    assert knee.capacity_high is not None and knee.capacity_high < 8, knee.capacity_text
    standing = answer_standing(knee, None)
    assert standing.kind == kind, why
    assert (standing.reason == "tail_in_doubt") == (kind == "cannot_tell"), why
    assert standing.in_doubt == (8 if kind == "cannot_tell" else None), why
    assert tail_in_doubt(knee) == standing.in_doubt, why


def test_no_stage_interval_is_undecided_where_the_yardsticks_spread_reaches_the_limit():
    knee = _knee(280.0, 316.0, 620.0)
    at_8 = next(v for v in knee.stages if v.target_users == 8)
    tail = signal_of(at_8, "tail_departure")
    assert tail is not None and not tail.fired and tail_undecided(tail)
    assert tail.fact.ratio == pytest.approx(620 / 316)
    assert tail.fact.upper_ratio == pytest.approx(620 / 280)  # the yardstick's median: its low end


def test_without_a_fit_there_is_nothing_to_doubt_against():
    knee = _knee(280.0, 316.0, 620.0, levels=[2, 4, 8, 16])  # 4 levels: no plateau fit
    assert knee.capacity_high is None and knee.max_concurrency == 8
    assert answer_standing(knee, None).kind == "answer"


def test_the_words_name_the_level_its_tail_and_the_fit():
    knee = _knee(280.0, 316.0, 620.0)
    check_golden("tail_in_doubt.txt", cannot_tell_text(answer_standing(knee, None), knee) + "\n")


@pytest.mark.parametrize(
    ("deployed", "kind"), [(4, "answer"), (8, "cannot_tell"), (None, "cannot_tell")]
)
def test_only_levels_up_to_the_deploy_figure_can_put_it_in_doubt(deployed, kind):
    """An SLO (or the memory) that sets the deploy figure below the level in doubt leaves the
    figure to deploy on levels the noise did not reach."""
    knee = _knee(280.0, 316.0, 620.0)
    deploy = DeployAnswer(deployed, "sla", "typed in")
    assert answer_standing(knee, deploy).kind == kind


def test_on_cannot_tell_no_output_shows_the_stages_point_figure():
    """The stages' answer (8) is the noise's pick: the tiles, the plots' marks, knee.json's
    answer and the one-line words show no capacity, only the fit's interval as the fit's own."""
    knee = _knee(280.0, 316.0, 620.0)
    assert knee.max_concurrency == 8 and knee.base_capacity is not None
    view = answer_view(knee, Recommendations(items=(), server_flags=(), cannot_tell=True))
    assert (view.capacity, view.past_users, view.deploy, view.agree_pct) == (None, None, None, None)
    assert view.interval == (4, 4)
    assert view.as_json()["capacity"] is None
    assert list(mark_labels(view)) == ["capacity_interval"]  # no capacity, no stage past it
    words = f"{mark_labels(view)['capacity_interval']}\n{capacity_words(view)}\n"
    check_golden("tail_in_doubt_view.txt", words)  # the fit's interval as its own, no "8"
    tiles = {name: figure for name, _, figure, _ in html_answer._tiles(knee, None, None)}
    assert tiles["capacity"] == 8  # without the standing: the point figure, as before
    told = Recommendations(items=(), server_flags=(), cannot_tell=True)
    tiles = {name: figure for name, _, figure, _ in html_answer._tiles(knee, told, None)}
    assert (tiles["capacity"], tiles["past"], tiles["base_capacity"]) == (None, None, None)
