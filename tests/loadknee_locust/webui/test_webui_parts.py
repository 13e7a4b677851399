"""The web UI's pure parts without a browser: SVG charts, the start form's checks and labels, the
live view's stage line and verdict table with a refine stage, the live judgement's JSON."""

from __future__ import annotations

import csv
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest

from loadknee_core.contract import GPU_COLUMNS, SERVER_METRIC_COLUMNS
from loadknee_locust.plugin.options import (
    FORM_GROUP_TITLES,
    LABELS,
    LlmOptions,
    option_specs,
)
from loadknee_locust.record.recorder import RunLog
from loadknee_locust.sweep.refine import LiveVerdict, StageJudgement
from loadknee_locust.sweep.schedule import Schedule, SchedulePlan
from loadknee_locust.webui import svgchart
from loadknee_locust.webui.formcheck import check_form
from loadknee_locust.webui.livetail import TelemetryTail
from loadknee_locust.webui.liveview import LiveView, banners, telemetry_charts, verdict_table

T0 = 5_000.0
#: the knee stage's reason in the live judgement (the input the verdict table shows)
FLAT = "throughput flat"


def circles(svg: str) -> list[tuple[str, float, float, float]]:
    """(series, x, y, cy) of every marker."""
    found = re.findall(r'<circle cx="[^"]+" cy="([^"]+)"[^>]*data-series="([^"]+)" '
                       r'data-x="([^"]+)" data-y="([^"]+)"', svg)  # fmt: skip
    return [(name, float(x), float(y), float(cy)) for cy, name, x, y in found]


def by_chart(svg: str) -> dict[str, list[list[tuple[float, float]]]]:
    """Each chart's (``data-chart``) series, in order, as their markers' (x, y)."""
    out: dict[str, list[list[tuple[float, float]]]] = {}
    for block in svg.split("<svg")[1:]:
        key = re.search(r'data-chart="([^"]+)"', block)
        assert key, block
        series: dict[str, list[tuple[float, float]]] = {}
        for name, x, y, _ in circles(block):
            series.setdefault(name, []).append((x, y))
        out[key.group(1)] = list(series.values())
    return out


def chart(*series: svgchart.Series, **kw: object) -> str:
    return svgchart.render(svgchart.Chart("k", "Title", "users", "tok/s", series, **kw))  # type: ignore[arg-type]


def test_chart_points_sit_on_their_values() -> None:
    svg = chart(svgchart.Series("a", ((1.0, 0.0), (2.0, 50.0), (4.0, 100.0))), log2_x=True)
    assert 'data-chart="k"' in svg and svg.startswith("<svg") and svg.endswith("</svg>")
    pts = circles(svg)
    assert [(x, y) for _, x, y, _ in pts] == [(1.0, 0.0), (2.0, 50.0), (4.0, 100.0)]
    top, bottom = svgchart.TOP, svgchart.HEIGHT - svgchart.BOTTOM
    # y axis from 0 to the nice maximum 100: 0 at the bottom, 100 at the top, 50 half-way
    assert [cy for *_, cy in pts] == [bottom, (top + bottom) / 2, top]
    cxs = [float(v) for v in re.findall(r'<circle cx="([^"]+)"', svg)]
    assert cxs[1] - cxs[0] == pytest.approx(cxs[2] - cxs[1], abs=0.2)  # log2: equal steps
    # the hover text: the series, its value with the y unit, then x with the x unit
    hover = re.findall(r"<title>([^<]*)</title>", svg)[1]
    at = [hover.find(part) for part in ("a:", "50 tok/s", "2 users")]
    assert -1 not in at and at == sorted(at), hover


def test_chart_axes_labels_and_reference_line() -> None:
    svg = chart(svgchart.Series("a", ((1.0, 230.0),)), hline=("baseline e2e P95", 180.0))
    assert ">users</text>" in svg and ">tok/s</text>" in svg and ">Title</text>" in svg
    assert ">250</text>" in svg  # the nice maximum above 230
    assert "baseline e2e P95" in svg


@pytest.mark.parametrize(
    "points",
    [(), ((1.0, None),), ((1.0, math.nan), (2.0, math.inf))],
    ids=["empty", "only-missing", "nan-and-inf"],
)
def test_chart_without_data_says_so(points: tuple[tuple[float, float | None], ...]) -> None:
    svg = chart(svgchart.Series("a", points))
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert texts[0] == "Title" and len(texts) == 2 and texts[1]  # the title, then one note
    assert "<circle" not in svg and "<rect" not in svg and "nan" not in svg.lower()  # no legend


def test_chart_single_point_and_a_gap() -> None:
    one = chart(svgchart.Series("a", ((8.0, 40.0),)))
    assert [(x, y) for _, x, y, _ in circles(one)] == [(8.0, 40.0)]
    cx = float(re.findall(r'<circle cx="([^"]+)"', one)[0])
    assert svgchart.LEFT < cx < svgchart.WIDTH - svgchart.RIGHT  # centred, not divided by zero
    gap = chart(svgchart.Series("a", ((1.0, 1.0), (2.0, math.nan), (4.0, 3.0), (8.0, 4.0))))
    paths = re.findall(r'<path d="(M[^"]+)" fill="none" stroke="#', gap)
    assert [p.count("L") for p in paths] == [0, 1]  # the NaN breaks the line in two
    assert [x for _, x, _, _ in circles(gap)] == [1.0, 4.0, 8.0]


FORM_OK = {"llm_levels": "1,2,4", "llm_stage_seconds": "4", "llm_warmup_seconds": "0.5"}


@pytest.mark.parametrize(
    ("field", "value", "flag", "words"),
    [
        ("llm_levels", "abc", "--llm-levels", ""),
        ("llm_levels", "0,2", "--llm-levels", "each >= 1"),
        ("llm_stage_seconds", "ten", "--llm-stage-seconds", "must be a number or 'auto'"),
        ("llm_batch_size", "1.5", "--llm-batch-size", "not a whole number"),
        ("llm_endpoint", "embeddings", "--llm-endpoint", "not one of"),
        ("llm_cooldown_seconds", "-1", "--llm-cooldown-seconds", "negative"),
        ("llm_warmup_seconds", "9", "--llm-warmup-seconds", "no measured window"),
    ],
)
def test_every_invalid_value_class_names_its_flag(
    field: str, value: str, flag: str, words: str
) -> None:
    message = check_form({**FORM_OK, field: value}, LlmOptions())
    assert message is not None and flag in message and words in message, message


@pytest.mark.parametrize(
    "form",
    [FORM_OK, {}, {**FORM_OK, "llm_no_refine": "true", "llm_temperature": "-0.5"}],
    ids=["short-sweep", "nothing-sent", "checkbox-and-temperature"],
)
def test_valid_forms_pass(form: dict[str, str]) -> None:
    assert check_form(form, LlmOptions()) is None


#: the options whose start-form label is their name, capitalised (LABELS names the rest): a
#: LABELS entry dropped, or a new option left to its name unasked, fails the test below
LABELLED_BY_NAME = {
    "model", "endpoint", "temperature", "batch_size", "input_tokens", "output_tokens",
    "log_format", "sample_without_replacement", "shared_prefix_tokens", "no_unique_tag",
    "replay_conversations", "gap_scale", "seed", "baseline_requests", "curve_scales",
    "max_in_flight", "time_scale", "run_id",
}  # fmt: skip


def test_every_option_has_a_short_label_and_a_form_group() -> None:
    for spec in option_specs():
        # exactly one source: its own label in LABELS, or its name
        assert (spec.name in LABELS) != (spec.name in LABELLED_BY_NAME), spec.flag
        assert 0 < len(spec.label) <= 28, spec.label
        assert spec.group in FORM_GROUP_TITLES, spec
    # no label for a removed option, none that repeats what the name gives
    assert set(LABELS) | LABELLED_BY_NAME == {s.name for s in option_specs()}
    assert [n for n, label in LABELS.items() if label == n.replace("_", " ").capitalize()] == []


def _refined_run(tmp_path: Path) -> RunLog:
    """Stages 1, 2, 4 users, then a refine stage at 3 users (the judgement said: knee at 4)."""
    plan = SchedulePlan((1, 2, 4, 8), stage_seconds=10.0, warmup_seconds=1.0,
                        cooldown_seconds=2.0, baseline_requests=0, refine=True)  # fmt: skip
    run = RunLog(tmp_path)
    run.schedule = sched = Schedule(plan, T0)
    answers = {
        0: LiveVerdict(None, None, 1),
        1: LiveVerdict(None, None, 2),
        2: LiveVerdict(4, None, 2, knee_stage=2, stages=(
            StageJudgement(0, 1, "comfortable"), StageJudgement(1, 2, "comfortable", noisy=True),
            StageJudgement(2, 4, "knee", (FLAT,)))),
    }  # fmt: skip
    now = T0
    for _ in range(200):  # 0.5 s ticks; the refine stage opens after about 40 s
        now += 0.5
        if sched.advance(now, decide=lambda stage: answers[stage]).kind == "refine":
            break
    assert sched.position().users == 3
    return run


def test_refine_stage_in_the_status_line_and_the_table_by_users(tmp_path: Path) -> None:
    run = _refined_run(tmp_path)
    sched = run.schedule
    assert sched is not None
    verdict = sched.verdicts[2]
    now = T0 + 1_000
    html = LiveView().fragment(run, None, verdict, None, now=now)
    status = html[: html.index("</p>")]
    assert "data-kind='refine'" in status
    # the bracket it narrows: the capacity so far (2 users), the first stage past it (4)
    assert re.search(r"<b>refine</b>\D*\b2\b\D*\b4\b", status), status
    assert "data-stage='3'" in status and "<b>3 users</b>" in status  # the stage, its users
    # the finished refine stage (3 users) sits between 2 and 4 users in the table
    now2 = now
    for _ in range(100):
        now2 += 0.5
        sched.advance(now2, decide=lambda stage: LiveVerdict(4, None, 3))
    assert [r.kind for r in sched.closed] == ["step", "step", "step", "refine", "step"]
    table = verdict_table(run, verdict, final=False)
    users = [int(u) for u in re.findall(r"data-users='(\d+)'", table)]
    assert users == [1, 2, 3, 4, 8], table  # ran as 1, 2, 4, 3, 8
    assert "<td>refine</td>" in table and f"knee</span></td><td>{FLAT}" in table
    # the noisy 2-user stage's verdict is marked as in the record table, and only it
    rows = dict(re.findall(r"data-users='(\d+)'>(.*?)</tr>", table))
    assert "comfortable</span><span class='lk-noisy'" in rows["2"], rows["2"]
    assert [u for u, row in rows.items() if "lk-noisy" in row] == ["2"], table
    run.close()


class _Runner:
    """A runner's CPU readings as the live view reads them (master + one worker)."""

    current_cpu_usage = 40.0

    class _Node:
        id = "w1"
        cpu_usage = 96.0

    clients: ClassVar[dict[str, Any]] = {"w1": _Node()}


def test_the_banners_name_errors_a_cpu_bound_worker_and_the_knee(tmp_path: Path) -> None:
    run = _refined_run(tmp_path)
    sched = run.schedule
    assert sched is not None
    start = sched.closed[1].warmup_end_unix_s + 0.5  # inside the 2-user stage's window
    for outcome in ("ok", "http_error", "timeout"):
        run.add({"start_unix_s": start, "end_unix_s": start + 1, "outcome": outcome,
                 "e2e_ms": 1000.0, "request_id": outcome})  # fmt: skip
    # the live judge's answer block and words (analysis.live.answer; their values:
    # test_one_answer.py's test_the_live_answer_is_the_reports)
    words = "capacity 2; no capacity interval (the fit over all stages found no plateau)"
    verdict = replace(sched.verdicts[2], past_users=4, past="knee", capacity_words=words)
    found = {b.kind: b for b in banners(run, _Runner(), verdict, now=T0 + 1_000)}
    assert set(found) == {"failures", "cpu_bound", "answer"}, found
    assert (found["failures"].level, found["failures"].failures) == ("bad", ((1, 2),))
    # the worker at 96 % is bound; this process at 40 % is not
    assert (found["cpu_bound"].level, found["cpu_bound"].hot) == ("warn", (("worker w1", 96.0),))
    knee = found["answer"]
    assert knee.level == "good" and words in knee.text  # the analysis's words for the capacity
    assert (knee.confirmed_by, knee.stopped) == (None, False)  # no higher level run yet
    # a verdict without the answer's words (an older child) shows no answer of its own
    assert not [b for b in banners(run, None, sched.verdicts[2], now=T0) if b.level == "good"]
    sched.stop(T0 + 2_000, "red_line")
    first = banners(run, None, None, now=T0 + 2_000)[0]
    assert (first.level, first.kind, first.stage) == ("bad", "red_line", sched.position().stage)
    run.close()


def test_the_memory_and_waiting_charts_read_the_run_files(tmp_path: Path) -> None:
    def write(name: str, columns: tuple[str, ...], rows: list[dict[str, object]]) -> None:
        with (tmp_path / name).open("w", newline="") as f:
            out = csv.DictWriter(f, fieldnames=columns)
            out.writeheader()
            out.writerows(rows)

    write("server_metrics.csv", SERVER_METRIC_COLUMNS, [
        {"timestamp_unix_s": T0 + 1, "metric": "vllm:gpu_cache_usage_perc", "value": 0.25},
        {"timestamp_unix_s": T0 + 2, "metric": "vllm:num_requests_waiting", "value": 3},
    ])  # fmt: skip
    write("gpu.csv", GPU_COLUMNS, [
        {"timestamp_unix_s": T0 + 1, "gpu_index": 0, "memory_used_mib": 8000,
         "memory_total_mib": 16000},
    ])  # fmt: skip
    tail = TelemetryTail(tmp_path)
    tail.update()
    charts = by_chart(telemetry_charts(tail, T0))
    kv, gpu_mem = charts["memory"]  # KV cache, then GPU memory
    assert (1.0, 25.0) in kv and (1.0, 50.0) in gpu_mem, charts
    assert (2.0, 3.0) in charts["waiting"][0], charts


def test_the_prefix_cache_chart_shows_the_hit_rate_between_scrapes(tmp_path: Path) -> None:
    rows = [
        {"timestamp_unix_s": T0 + t, "metric": f"vllm:prefix_cache_{name}_total", "value": v}
        for t, q, h in ((1, 0, 0), (2, 1000, 800), (3, 2000, 1300), (4, 2500, 1700))
        for name, v in (("queries", q), ("hits", h))
    ]
    with (tmp_path / "server_metrics.csv").open("w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=SERVER_METRIC_COLUMNS)
        out.writeheader()
        out.writerows(rows)
    tail = TelemetryTail(tmp_path)
    tail.update()  # the last scrape waits for a later one (its label sets may not all be in)
    assert list(tail.series["cache_hit_pct"]) == [(T0 + 2, 80.0), (T0 + 3, 50.0)]
    assert by_chart(telemetry_charts(tail, T0))["cache"] == [[(2.0, 80.0), (3.0, 50.0)]]
    assert "cache" not in by_chart(telemetry_charts(TelemetryTail(tmp_path / "none"), T0))


def test_a_live_cannot_tell_replaces_the_provisional_answer(tmp_path: Path) -> None:
    """Where the stages so far give no answer that stands, the watcher reads the report's own
    "cannot tell" words, not a provisional capacity the report will refuse to give."""
    run = _refined_run(tmp_path)
    sched = run.schedule
    assert sched is not None
    said = "cannot tell: the words of analysis.report.standing.cannot_tell_text"
    words = "capacity 2; no capacity interval (the fit over all stages found no plateau)"
    verdict = replace(sched.verdicts[2], past_users=4, past="knee", capacity_words=words)
    assert [b.kind for b in banners(run, None, verdict, now=T0)] == ["answer"]
    told = replace(verdict, cannot_tell=said)
    (banner,) = banners(run, None, told, now=T0)
    assert (banner.kind, banner.level) == ("cannot_tell", "warn")
    assert said in banner.text and words not in banner.text
    run.close()
