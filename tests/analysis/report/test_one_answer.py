"""One answer everywhere: the screen, report.html's tiles, the plots' marks, knee.json,
recommendations.yaml and the cluster files (KEDA, HPA, alerts, latency profile, energy, llm-d)
show the same deploy figure and capacity (issue 39, item 1), and a flag to
try is never a command to paste (item 2). Values and structure only: the words are the golden
files' (test_golden_screen.py)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
import yaml

from analysis.advice.facts import DeployAnswer, DeployFact, Recommendations
from analysis.cli import main
from analysis.live.answer import judge
from analysis.pipeline import analyze_run
from analysis.report.advice_words import BOUND_WORDS, deploy_bound_text
from analysis.report.answer_view import answer_view, mark_labels
from analysis.report.html_answer import answer_html
from analysis.report.plots import latency_figure, throughput_figure
from analysis.report.standing import cannot_tell_text
from loadknee_core.slo_targets import RUN_SLO_PARAMETER
from loadknee_locust.sweep.refine import LiveVerdict
from tests.support.report_fixtures import (
    no_global_figures,  # noqa: F401 (autouse fixture)
    write_run_dir,
)

#: the demo's shape: 8 slots bind with the KV cache 15 % used (test_golden_screen's "demo")
DEMO = {"levels": (1, 2, 4, 8, 12, 16), "slots": 8, "kv_full_pct": 15.0, "stage_s": 9.0}
#: memory binds before the slots: the deploy figure is below the capacity
MEMORY = {"levels": (1, 2, 4, 6, 8, 10, 12, 16)}

_MARK = re.compile(r'<span class="mark" data-mark="([^"]*)">([^<]*)</span>')
_CARD = re.compile(r'<div class="card" data-name="([^"]*)" data-value="([^"]*)">')


def _analyzed(tmp_path: Path, kwargs: dict, capsys: pytest.CaptureFixture) -> tuple[Path, str]:
    run = write_run_dir(tmp_path / "run", **kwargs)
    assert main([str(run), "--quiet"]) == 0
    return run, capsys.readouterr().out


def _screen_deploy(screen: str) -> int:
    match = re.match(r"DEPLOY: (\d+) ", screen)
    assert match, screen.splitlines()[0]
    return int(match.group(1))


def _marks(ax) -> dict[str, float]:
    return {str(line.get_gid()): line.get_xdata()[0] for line in ax.get_lines() if line.get_gid()}


@pytest.mark.parametrize("case", [DEMO, MEMORY], ids=["demo", "memory"])
def test_screen_tiles_plots_and_files_agree(case, tmp_path, capsys) -> None:
    run, screen = _analyzed(tmp_path, case, capsys)
    report = run / "report"
    page = (report / "report.html").read_text(encoding="utf-8")
    cards = _CARD.findall(page)
    doc = json.loads((report / "knee.json").read_text(encoding="utf-8"))
    answer = doc["answer"]
    recs = yaml.safe_load((report / "recommendations.yaml").read_text(encoding="utf-8"))
    deploy = _screen_deploy(screen)
    # the first tile is the deploy figure, the second the capacity: the screen's numbers
    assert cards[0] == ("deploy", str(deploy))
    assert cards[1] == ("capacity", str(answer["capacity"]))
    assert answer["deploy_concurrency"] == deploy == recs["server"]["deploy_concurrency"]
    assert answer["capacity"] == recs["server"]["max_concurrency"] == doc["knee"]["max_concurrency"]
    # the screen's capacity line carries the same capacity
    capacity_line = screen.splitlines()[1]
    assert re.match(rf"capacity {answer['capacity']}\b", capacity_line)
    # the tile of the first stage past the capacity is not the capacity
    past = dict(cards)["past"]
    assert int(past) == answer["first_past_capacity_users"] > answer["capacity"]
    # the plots mark the same figures, the capacity in its interval band
    analysis = analyze_run(run)
    view = answer_view(analysis.knee, analysis.recommendations)
    said = {gid: html.unescape(text) for gid, text in _MARK.findall(page)}
    assert said == mark_labels(view)
    assert said["capacity"].endswith(f"({answer['capacity']})")
    for fig in (
        throughput_figure(analysis.summary, analysis.knee, view),
        latency_figure(analysis.summary, analysis.knee, view),
    ):
        marks = _marks(fig.axes[0])
        # the legend's words for the marks are the ones report.html's caption gives them
        legend = fig.axes[0].get_legend_handles_labels()[1]
        assert [label for label in legend if label in said.values()] == list(said.values())
        assert marks["capacity"] == answer["capacity"]
        assert marks.get("deploy", marks["capacity"]) == deploy
        assert marks["past"] == answer["first_past_capacity_users"]
        (band,) = [p for p in fig.axes[0].patches if p.get_gid() == "capacity_interval"]
        assert band.get_x() == pytest.approx(analysis.knee.capacity_low)
        low, high = answer["capacity_interval"]
        assert low <= answer["capacity"] <= high  # printed beside it: it contains it
        assert answer["interval_contains_capacity"] is True


#: the answer line every cluster file and recommendations.yaml head with
_ANSWER = re.compile(
    r"the answer: deploy (\d+); capacity (\d+) .*?90 % interval (\d+)(?:–(\d+))?; "
    r"first stage past it: (\d+) users? \((knee|red line)\)"
)


def _header(path: Path) -> str:
    """The file's leading comment lines as one line of text."""
    lines = path.read_text(encoding="utf-8").splitlines()
    head = [line[2:] for line in lines[: next(i for i, x in enumerate(lines) if x[:1] != "#")]]
    return " ".join(head)


def _stated(text: str) -> tuple[int, int, list[int], int, str]:
    """deploy, capacity, interval, first stage past it and its kind, as a header states them."""
    match = _ANSWER.search(text)
    assert match, text
    deploy, capacity, low, high, past, kind = match.groups()
    interval = [int(low), int(high or low)]
    return int(deploy), int(capacity), interval, int(past), kind


@pytest.mark.parametrize("case", [DEMO, MEMORY], ids=["demo", "memory"])
def test_cluster_files_state_the_same_answer(case, tmp_path, capsys) -> None:
    run, screen = _analyzed(tmp_path, case, capsys)
    report = run / "report"
    answer = json.loads((report / "knee.json").read_text(encoding="utf-8"))["answer"]
    expected = (
        _screen_deploy(screen),
        answer["capacity"],
        answer["capacity_interval"],
        answer["first_past_capacity_users"],
        answer["first_past_capacity"],
    )
    names = ("keda-scaledobject.yaml", "hpa.yaml", "alerts.rules.yaml", "latency-profile.yaml")
    files = [report / name for name in (*names, "energy.yaml", "recommendations.yaml")]
    files += sorted((report / "llm-d").glob("*.yaml"))
    assert len(files) > 6  # the llm-d reports were written too
    for path in files:
        assert _stated(_header(path)) == expected, path.name
    # a per-stage figure names the stage it stands on, with the answer's figures
    text = (report / "energy.yaml").read_text(encoding="utf-8")
    capacity = re.search(r"# the capacity's stage \(max_concurrency\), (\d+) users?\n", text)
    assert capacity and int(capacity.group(1)) == answer["capacity"]
    knee = re.search(r"# the knee stage, the first past the capacity, (\d+) users?\n", text)
    assert knee and int(knee.group(1)) == answer["first_past_capacity_users"]
    # the thresholds' evidence stands on the first stage past the capacity, under its kind
    for name in ("keda-scaledobject.yaml", "hpa.yaml", "alerts.rules.yaml"):
        text = (report / name).read_text(encoding="utf-8")
        said = {
            int(n)
            for n in re.findall(rf"at the {answer['first_past_capacity']}, (\d+) users", text)
        }
        assert said == {answer["first_past_capacity_users"]}, name


@pytest.mark.parametrize("case", [DEMO, MEMORY], ids=["demo", "memory"])
def test_the_live_answer_is_the_reports(case, tmp_path, capsys) -> None:
    """The web UI's provisional answer (the live judge's, read by the sweep) on the finished
    run: the capacity, its interval and the first stage past it of knee.json, in the screen's
    words (without the resamples' share, which only the full analysis computes)."""
    run, screen = _analyzed(tmp_path, case, capsys)
    answer = json.loads((run / "report" / "knee.json").read_text(encoding="utf-8"))["answer"]
    live = judge(str(run))
    keys = ("capacity", "capacity_interval", "first_past_capacity_users", "first_past_capacity")
    assert {k: live["answer"][k] for k in keys} == {k: answer[k] for k in keys}
    assert live["answer"]["deploy_concurrency"] is None  # only the report has the advice
    verdict = LiveVerdict.from_json(live)
    assert (verdict.max_concurrency, verdict.past_users, verdict.past) == (
        answer["capacity"],
        answer["first_past_capacity_users"],
        answer["first_past_capacity"],
    )
    said = re.sub(r" \(\d+ % of resamples agree\)", "", screen.splitlines()[1])
    assert verdict.capacity_words == said


def test_deploy_below_capacity_is_marked_apart(tmp_path, capsys) -> None:
    run, screen = _analyzed(tmp_path, MEMORY, capsys)
    analysis = analyze_run(run)
    view = answer_view(analysis.knee, analysis.recommendations)
    assert view.deploy is not None and view.capacity is not None and view.deploy < view.capacity
    assert _screen_deploy(screen) == view.deploy
    marks = _marks(throughput_figure(analysis.summary, analysis.knee, view).axes[0])
    assert (marks["deploy"], marks["capacity"]) == (view.deploy, view.capacity)


def test_a_flag_to_try_is_no_command_to_paste(tmp_path, capsys) -> None:
    run, screen = _analyzed(tmp_path, DEMO, capsys)
    page = (run / "report" / "report.html").read_text(encoding="utf-8")
    recs = yaml.safe_load((run / "report" / "recommendations.yaml").read_text(encoding="utf-8"))
    predicted = recs["vllm"]["max_num_seqs"]
    # words are the product: a shell command (here: its absence), not prose
    assert "vllm serve" not in page  # the only vLLM flag is one to try
    assert f'<li class="try" data-flag="--max-num-seqs {predicted}">' in page
    fix = [line for line in screen.splitlines() if line.startswith("fix:")]
    assert len(fix) == 1 and f"~{predicted}" in fix[0]  # one line, the value with its basis
    assert f"--max-num-seqs {predicted} " not in fix[0] + " "  # not as a flag to paste


def test_a_flag_to_set_is_a_command(tmp_path, capsys) -> None:
    run, _ = _analyzed(tmp_path, MEMORY, capsys)
    page = (run / "report" / "report.html").read_text(encoding="utf-8")
    recs = yaml.safe_load((run / "report" / "recommendations.yaml").read_text(encoding="utf-8"))
    assert f"--max-num-seqs {recs['vllm']['max_num_seqs']}" in page.split("vllm serve", 1)[1]
    assert 'class="try"' not in page


@pytest.mark.parametrize(
    ("capacity", "fit", "low", "high", "interval", "contains"),
    [
        (8, 8.1, 8.0, 8.3, (8, 8), True),
        (8, 7.2, 6.9, 7.4, (7, 7), False),  # the short run of issue 39: the fit disagrees
        (6, 6.4, 5.2, 11.6, (5, 12), True),
        (8, None, None, None, None, None),  # no plateau: no interval to show
    ],
)
def test_the_interval_shown_contains_the_capacity_or_says_not(
    capacity, fit, low, high, interval, contains
) -> None:
    from analysis.report.answer_view import AnswerView

    view = AnswerView(8, capacity, True, fit, low, high, 12, "knee", 100.0)
    assert view.interval == interval
    assert view.contains is contains
    assert view.as_json()["interval_contains_capacity"] is contains


@pytest.mark.parametrize(
    ("agree", "unresampled", "said"),
    [
        (100.0, (), "capacity 4 (100 % of resamples agree)"),
        (None, (4, 8), "capacity 4 (no confidence figure: its stages at 4 and 8 users were too "
                       "short to resample)"),
        (None, (8,), "capacity 4 (no confidence figure: its stage at 8 users was too short to "
                     "resample)"),
        (None, (), "capacity 4"),  # read back from knee.json: no share and no false claim
    ],
)  # fmt: skip
def test_a_share_of_agreeing_resamples_is_shown_only_where_it_was_measured(
    agree, unresampled, said
) -> None:
    """Fresh #24's starved run: 1.5 s stages at 4 and 8 users, no windows to resample, printed
    "capacity 4 (100 % of resamples agree)" beside the same stages marked too short to judge."""
    from analysis.report.answer_view import AnswerView, capacity_words

    view = AnswerView(4, 4, True, None, None, None, 8, "knee", agree, unresampled=unresampled)
    assert capacity_words(view).split(";")[0] == said


def test_the_live_judge_says_the_reports_cannot_tell(tmp_path) -> None:
    """The web UI's live answer on a run the report cannot answer: the golden ``slo`` case's run
    without its SLO (throughput flat from 6 users, 12 users' P95 at 2.00x the baseline's with
    its interval reaching past it, the fit over all stages at 6): the report says "cannot tell"
    (tail_in_doubt), and the live judge gives the same words instead of a provisional capacity
    of 12. With the SLO in run.json (capacity 6) the doubt at 12 does not reach the answer."""
    run = write_run_dir(tmp_path / "run", levels=(1, 2, 4, 6, 8, 12), with_server_metrics=False)
    analysis = analyze_run(run)
    assert (analysis.standing.reason, analysis.standing.in_doubt) == ("tail_in_doubt", 12)
    live = judge(str(run))
    assert live["cannot_tell"] == cannot_tell_text(analysis.standing, analysis.knee)
    assert LiveVerdict.from_json(live).cannot_tell == live["cannot_tell"]
    info = json.loads((run / "run.json").read_text(encoding="utf-8"))
    info.setdefault("parameters", {})[RUN_SLO_PARAMETER] = "e2e_p95_ms=300"  # as `run --slo`
    (run / "run.json").write_text(json.dumps(info), encoding="utf-8")
    bound = judge(str(run))
    assert bound["slo_capacity"] == 6 and bound["cannot_tell"] == ""


def test_a_soft_knees_deploy_figure_is_bound_by_the_tail_it_names() -> None:
    """A soft knee (nothing queued at the knee, the tail departed below it) deploys the level
    before the departure: the "bound by" of the DEPLOY line and the deploy tile names that
    departure, the knee and the offline batch, not "the knee" alone (16 to deploy beside a knee
    at 40 read as a contradiction); any other answer keeps its limit's words."""
    soft = DeployFact("configure", users=16, at_users=40, bounds=("knee",), departed_users=24,
                      batch_users=38)  # fmt: skip
    said = deploy_bound_text(DeployAnswer(16, "knee", soft))
    assert re.findall(r"\d+", said) == ["24", "40", "38"]
    plain = DeployFact("configure", users=38, at_users=40, bounds=("knee",))
    assert deploy_bound_text(DeployAnswer(38, "knee", plain)) == BOUND_WORDS["knee"]
    assert deploy_bound_text(DeployAnswer(8, "knee", "as read back")) == BOUND_WORDS["knee"]
    recs = Recommendations(items=(), server_flags=(), deploy=DeployAnswer(16, "knee", soft))
    tile = answer_html(None, recs)
    assert said in html.unescape(tile)
