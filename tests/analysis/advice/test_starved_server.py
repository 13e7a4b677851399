"""A server that shared an overloaded machine and lost throughput at the level that decided the
answer: "cannot tell" (``starved_server``, issue 39), on values.

The case behind it (fresh #17): the refine table's 10-slot simulator swept while llama-server ran
at a raised priority beside the suite, load 6.4 on 2 cores: 428 tok/s at 6 users, 333 at 8, P95
2.01x the baseline; the answer was 6 for 10 with every resample agreeing and the fit over all
stages agreeing (5-6: it reads the same starved stages), beside only a shared-host warning.
"""

from __future__ import annotations

import pytest

from analysis.advice.standing import answer_standing, starved_server
from analysis.diagnosis.facts import SharedHostFact
from analysis.diagnosis.failures import overloaded_stages
from analysis.knee.find import find_knee
from analysis.report.standing import cannot_tell_text
from analysis.stages.baseline import compute_baseline
from tests.support.golden import check_golden
from tests.support.knee_frames import frame, stage

LEVELS = [1, 2, 4, 6, 8]
#: the recording's output tok/s and P95 e2e (ms) per level; the baseline P95 709 ms
TOK_S = [93.9, 178.0, 318.0, 428.0]
P95 = [686.0, 724.0, 845.0, 874.0, 1420.0]
URL = "http://127.0.0.1:8000"


def _summary(at_8: float, loads: dict[int, float], url: str = URL, lag_at_8: float = 1.0):
    rows = [stage(1, kind="baseline", output_tok_s=86.3, e2e_p50_ms=679.0, e2e_p95_ms=709.0,
                  e2e_p99_ms=711.0, ok=20, requests=20, host_load_1m=loads.get(0, 1.0),
                  host_cpus=2)]  # fmt: skip
    for users, tok_s, p95 in zip(LEVELS, [*TOK_S, at_8], P95, strict=True):
        rows.append(stage(users, output_tok_s=tok_s, e2e_p50_ms=0.97 * p95, e2e_p95_ms=p95,
                          e2e_p99_ms=p95, ok=40, requests=40,
                          host_load_1m=loads.get(users, 1.0), host_cpus=2,
                          client_lag_mean_ms=lag_at_8 if users == 8 else 1.0))  # fmt: skip
    summary = frame(rows)
    knee = find_knee(summary, compute_baseline(None, summary))
    return knee, overloaded_stages(summary, {"target_url": url})


@pytest.mark.parametrize(
    ("at_8", "loads", "url", "kind", "why"),
    [
        (333.0, {6: 6.4, 8: 6.4}, URL, "cannot_tell", "fresh #17: fell 22 % on an overloaded host"),
        (333.0, {8: 3.0}, URL, "cannot_tell", "1.5 per core at the deciding level is enough"),
        (333.0, {6: 6.4}, URL, "answer", "overloaded below the deciding level only"),
        (333.0, {8: 2.9}, URL, "answer", "1.45 per core: not overloaded"),
        (333.0, {8: 6.4}, "http://10.0.0.7:8000", "answer", "a remote server: its own CPU"),
        (430.0, {8: 6.4}, URL, "answer", "flat, not fallen: a limit, even on a busy machine"),
        (415.0, {8: 6.4}, URL, "answer", "fell 7 % of one user's rate per user: within flat"),
    ],
)
def test_a_fall_at_the_deciding_level_on_an_overloaded_shared_machine_is_cannot_tell(
    at_8, loads, url, kind, why
):
    knee, overloaded = _summary(at_8, loads, url)
    assert (knee.max_concurrency, knee.knee_users) == (6, 8), why  # the answer the run gives
    standing = answer_standing(knee, None, overloaded=overloaded)
    assert standing.kind == kind, why
    if kind == "cannot_tell":
        assert standing.reason == "starved_server"
        assert standing.starved == SharedHostFact(8, loads[8], 2, "127.0.0.1", 1.5)
        assert standing.first_past == 8


def test_no_level_past_the_answer_no_doubt() -> None:
    knee, overloaded = _summary(333.0, {8: 6.4})
    assert starved_server(knee, (), overloaded) is None  # the answer is the top level


def test_a_late_load_generator_is_named_before_the_starved_server() -> None:
    # the same run with its load generator late at 8 users: the client's lag is the first cause
    knee, overloaded = _summary(333.0, {8: 6.4}, lag_at_8=600.0)
    assert starved_server(knee, (8,), overloaded) is not None
    assert answer_standing(knee, None, overloaded=overloaded).reason == "late_client"


def test_the_words_name_the_fall_and_the_load() -> None:
    knee, overloaded = _summary(333.0, {6: 6.4, 8: 6.4})
    standing = answer_standing(knee, None, overloaded=overloaded)
    check_golden("starved_server.txt", cannot_tell_text(standing, knee) + "\n")
