"""The web UI's open-loop view on values: offered vs served, the backlog, the analysis's rows
replacing the live ones, the chart and the status line, and the start form's rate checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loadknee_locust.arrivals.plan import OpenLoopPlan
from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.record.recorder import RunLog
from loadknee_locust.sweep.rateanswer import RateAnswer, RateStageJudgement
from loadknee_locust.sweep.refine import LiveVerdict
from loadknee_locust.sweep.schedule import Schedule, SchedulePlan
from loadknee_locust.webui.formcheck import check_form
from loadknee_locust.webui.liveview import LiveView
from loadknee_locust.webui.openloop import LiveRow, RateWindow, knee_words, live_row, rate_rows

#: 4 requests/s, constant gaps from 0.5 s: 0.5, 0.75, 1.0, ... (s after the stage's start)
EVERY_QUARTER = tuple(0.5 + 0.25 * i for i in range(38))  # the last at 9.75 s


def _window(ended: int, served: int) -> RateWindow:
    """A 10 s stage from t=100: warm-up to 101, measured to 110."""
    return RateWindow(3, 4.0, 100.0, 101.0, 110.0, EVERY_QUARTER, ended, served)


@pytest.mark.parametrize(
    ("now", "ended", "served", "offered", "served_rps", "pct", "backlog"),
    [
        # before the stage starts: nothing planned yet, nothing to say
        (99.0, 0, 0, None, None, None, None),
        # in the warm-up: no measured window yet; sends at 0.5 and 0.75 s, one answered
        (100.9, 1, 0, None, None, None, 1.0),
        # half a second into the window: too short a span for a rate (one send swings it by
        # 2/s); 5 sends due (0.5 .. 1.5 s), 4 ended
        (101.5, 4, 0, None, None, None, 1.0),
        # 4 s into the window: 16 sends planned in it (1.0 .. 4.75 s), 10 answered ok; 19 due
        # by now (0.5 .. 5.0 s), 14 ended: 5 outstanding
        (105.0, 14, 10, 4.0, 2.5, 62.5, 5.0),
        # after the window: 36 planned in it (1.0 .. 9.75), 36 served ok, all 38 ended
        (130.0, 38, 36, 4.0, 4.0, 100.0, 0.0),
        # more rows than planned sends (a retried or duplicated row) never shows a negative
        (130.0, 40, 36, 4.0, 4.0, 100.0, 0.0),
    ],
    ids=["before", "warm-up", "first-second", "measuring", "after", "over-counted"],
)
def test_live_numbers(
    now: float,
    ended: int,
    served: int,
    offered: float | None,
    served_rps: float | None,
    pct: float | None,
    backlog: float | None,
) -> None:
    row = live_row(_window(ended, served), now)
    assert (row.offered_rps, row.served_rps, row.served_pct, row.backlog) == (
        offered if offered is None else pytest.approx(offered),
        served_rps if served_rps is None else pytest.approx(served_rps),
        pct if pct is None else pytest.approx(pct),
        backlog,
    )
    assert isinstance(row, LiveRow) and (row.stage, row.rate_rps) == (3, 4.0)


def test_a_window_with_no_planned_send_offers_zero_and_no_percentage() -> None:
    row = live_row(RateWindow(1, 0.05, 0.0, 1.0, 10.0, (12.0,), 0, 0), 10.0)
    assert (row.offered_rps, row.served_rps, row.served_pct, row.backlog) == (0.0, 0.0, None, 0.0)


JUDGED = RateStageJudgement(3, 4.0, 3.9, 2.0, 51.3, 6.5, 1.0, 12.0, "past knee", "served 51 %")


def test_the_analysis_row_replaces_the_live_one_once_judged() -> None:
    answer = RateAnswer((JUDGED,), 3, 4.0, None, "rate knee at 4 requests/s")
    other = RateWindow(5, 8.0, 100.0, 101.0, 110.0, EVERY_QUARTER, 0, 0)
    rows = rate_rows([_window(38, 36), other], answer, now=130.0)
    assert rows == [JUDGED, live_row(other, 130.0)]
    assert rate_rows([_window(38, 36)], None, now=130.0) == [live_row(_window(38, 36), 130.0)]


def test_the_answer_block_parses() -> None:
    block = {
        "knee": {"knee_stage": 2, "knee_rate_rps": 8.0, "max_rate_rps": 4.0, "text": "words"},
        "stages": [
            {"stage": 2, "rate_rps": 8.0, "offered_rps": 7.9, "served_rps": None,
             "served_pct": None, "backlog_mean": 3.0, "backlog_first": 1.0,
             "backlog_last": 5.0, "rate_verdict": "past knee", "rate_reasons": "why"},
        ],
    }  # fmt: skip
    answer = LiveVerdict.from_json({"rates": block}).rates
    assert answer == RateAnswer(
        (RateStageJudgement(2, 8.0, 7.9, None, None, 3.0, 1.0, 5.0, "past knee", "why"),),
        2, 8.0, 4.0, "words",
    )  # fmt: skip
    assert LiveVerdict.from_json({"rates": None}).rates is None


T0 = 1_000.0
PLAN = OpenLoopPlan(
    rates=(2.0, 4.0, 8.0), process="constant", burstiness=1.0, max_in_flight=16,
    arrival_log="", time_scale=1.0, seed=0, stage_seconds=10.0,
)  # fmt: skip


def _open_run(tmp_path: Path) -> tuple[RunLog, float]:
    """Three 10 s rate stages (1 s warm-up, 1 s cooldown); now 5 s into the second."""
    plan = SchedulePlan((1, 1, 1), stage_seconds=10.0, warmup_seconds=1.0,
                        cooldown_seconds=1.0, baseline_requests=0)  # fmt: skip
    run = RunLog(tmp_path)
    run.schedule = sched = Schedule(plan, T0)
    now = T0
    while not (sched.position().stage == 1 and sched.position().phase == "measure"):
        now += 0.25
        sched.advance(now)
    start = sched.stage_start()
    assert start is not None
    now = start + 5.0
    sched.advance(now)
    # stage 0 (2/s from 0.5 s): every send answered in 0.1 s; stage 1 (4/s): the sends up to
    # 3 s answered, the ones after still out
    for stage_start, rate, until in ((T0, 2.0, 10.0), (start, 4.0, 3.0)):
        t = stage_start + 0.5
        while t < stage_start + until:
            run.add({"request_id": f"r{t}", "intended_unix_s": t, "start_unix_s": t,
                     "end_unix_s": t + 0.1, "e2e_ms": 100.0, "outcome": "ok"})  # fmt: skip
            t += 1.0 / rate
    return run, now


def test_the_open_loop_view_shows_rates_not_users(tmp_path: Path) -> None:
    run, now = _open_run(tmp_path)
    view = LiveView().fragment(run, None, None, None, now=now, open_plan=PLAN)
    status = view[: view.index("</p>")]
    assert "<b>4 requests/s</b>" in status and "users" not in status, status
    assert "lk-verdicts" not in view and 'data-chart="throughput"' not in view
    rows = re.findall(r"<tr data-stage='(\d)' data-rate='([\d.]+)' data-judged='0'"
                      r" data-offered='([\d.]+)' data-served='([\d.]+)' data-backlog='(\d+)'",
                      view)  # fmt: skip
    # stage 0: 18 sends in its window (1.0 .. 9.5 s), all answered ok: 2/s offered and served;
    # stage 1 at 5 s: 16 planned in the window so far (1.0 .. 4.75 s), 8 answered (1.0 .. 2.75);
    # 19 due (0.5 .. 5.0 s), 10 ended (0.5 .. 2.75): 9 outstanding
    assert rows == [("0", "2", "2", "2", "0"), ("1", "4", "4", "2", "9")], rows
    points = re.findall(r'data-series="(offered|served)" data-x="([\d.]+)" data-y="([\d.]+)"', view)
    assert sorted(points) == [("offered", "2", "2"), ("offered", "4", "4"),
                              ("served", "2", "2"), ("served", "4", "2")]  # fmt: skip
    run.close()


def test_the_rate_knee_banner_and_the_judged_rows(tmp_path: Path) -> None:
    run, now = _open_run(tmp_path)
    judged = RateStageJudgement(0, 2.0, 2.0, 1.98, 99.0, 0.2, 0.2, 0.2, "follows", "")
    answer = RateAnswer((judged,), None, None, 2.0, "no rate knee up to 2 requests/s")
    verdict = LiveVerdict(None, None, 1, capacity_words="1 user", past_users=1, rates=answer)
    view = LiveView().fragment(run, None, verdict, None, now=now, open_plan=PLAN)
    provisional, final = knee_words(answer, final=False), knee_words(answer, final=True)
    assert provisional is not None and final is not None
    assert provisional in view and final not in view  # the report is not written yet
    assert answer.text in final and "Provisional" not in final
    assert "1 user" not in view  # the closed loop's answer in users means nothing here
    assert (
        "data-stage='0' data-rate='2' data-judged='1' data-offered='2' data-served='1.98'" in view
    )
    assert "(0.2 → 0.2)" in view and "lk-v-follows" in view
    run.close()


OPEN_FORM = {"llm_rates": "1,2,4", "llm_stage_seconds": "4", "llm_warmup_seconds": "0.5"}


@pytest.mark.parametrize(
    ("form", "open_loop", "words"),
    [
        ({**OPEN_FORM, "llm_rates": "1,x"}, True, "--llm-rates must be comma-separated numbers"),
        ({**OPEN_FORM, "llm_rates": "0,2"}, True, "each > 0"),
        ({**OPEN_FORM, "llm_rates": ""}, True, "open-loop load needs --llm-rates"),
        ({**OPEN_FORM, "llm_max_in_flight": "0"}, True, "--llm-max-in-flight must be >= 1"),
        ({**OPEN_FORM, "llm_rates": "1,x"}, False, "--llm-rates must be comma-separated"),
        (OPEN_FORM, False, "ignore rates"),
    ],
    ids=["not-a-number", "zero", "none-given", "no-slot", "bad-anywhere", "closed-loop-ui"],
)
def test_the_form_checks_the_rates(form: dict[str, str], open_loop: bool, words: str) -> None:
    message = check_form(form, LlmOptions(), open_loop=open_loop)
    assert message is not None and words in message, message


def test_a_valid_open_loop_form_passes() -> None:
    assert check_form(OPEN_FORM, LlmOptions(), open_loop=True) is None
    assert check_form({**OPEN_FORM, "llm_rates": ""}, LlmOptions(), open_loop=False) is None
