"""Watch a sweep live in Locust's web UI with a real headless chromium (local, then master + 2
workers): the current stage changes, the charts and verdicts fill in stage by stage, the report
link opens report.html, and the finished stages' live numbers match ``loadknee analyze``.

The two watches run side by side, each its own chromium, simulator and Locust (each waits on its
stages' clock: 48 s and 58 s one after the other, about the longer of the two at once)."""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from loadknee_locust.plugin.options import FORM_GROUP_TITLES
from loadknee_locust.sim.launch import SimProcess
from tests.support.browser_support import displayed, open_browser, screenshot
from tests.support.paths import REPO
from tests.support.run_support import (
    check_run,
    http_get,
    http_post,
    only_run_dir,
    read_run_dir,
    sweep_args,
    wait_workers,
    web_ui,
    worker_args,
)

pytestmark = pytest.mark.slow

LEVELS = [1, 2, 4]
#: the packaged example: streams chat completions, so throughput and TTFT are measured
STREAMING = str(REPO / "locustfiles" / "fixed_length.py")
SWEEP_TIMEOUT_S = 90.0


def _js(driver: Any, script: str) -> Any:
    return driver.execute_script(script)


LIVE_STATE = """
const box = document.getElementById('lk-live');
if (!box) return null;
const st = box.querySelector('.lk-status');
const pts = (chart, series) => Array.from(box.querySelectorAll(
    `svg[data-chart="${chart}"] circle[data-series="${series}"]`)).map(
    c => [Number(c.dataset.x), Number(c.dataset.y)]);
return {
  stage: st && st.dataset.stage !== undefined ? Number(st.dataset.stage) : null,
  finished: st ? st.dataset.finished === '1' : false,
  in_tab: box.dataset.inTab === '1',
  tput: pts('throughput', 'measured'),
  ttft: pts('latency', 'TTFT P50'),
  verdicts: Array.from(box.querySelectorAll('table.lk-verdicts tbody tr')).map(
      r => [Number(r.dataset.stage), r.querySelector('.lk-v').textContent]),
  report: (box.querySelector('a.lk-report') || {}).href || null,
  text: box.textContent,
};
"""


def _wait_for(
    driver: Any, check: Any, what: str, seen: Any, timeout_s: float = 20.0
) -> dict[str, Any]:
    """Poll the live view until ``check(state)`` holds, passing each view to ``seen``; fail
    naming ``what`` and the last view."""
    deadline = time.monotonic() + timeout_s
    state = None
    while time.monotonic() < deadline:
        state = _js(driver, LIVE_STATE)
        if state:
            seen(state)
        if state and check(state):
            return dict(state)
        time.sleep(0.2)
    raise AssertionError(f"{what}: not seen in {timeout_s:.0f} s; last view: {state}")


def _watch(driver: Any, base: str, shots: Path, workers: int) -> dict[str, Any]:
    """Open the Knee tab, start the sweep over HTTP, watch until the report link shows."""
    driver.get(base + "/?tab=knee")
    screenshot(driver, shots, "00-form")
    # the start form's own options, as a user opens them: short labels under section titles
    displayed(driver, "xpath", "//*[text()='Custom parameters']").click()
    displayed(driver, "css selector", "[name='llmLevels']")
    displayed(driver, "css selector", ".lk-group-title[data-group='record']")  # fully open
    shown = driver.find_elements("css selector", ".lk-group-title")
    groups = [e.get_attribute("data-group") for e in shown]
    assert groups == list(FORM_GROUP_TITLES), groups  # every group, in the form's order
    titles = [e.text for e in shown]
    assert titles == [FORM_GROUP_TITLES[g] for g in groups], titles
    screenshot(driver, shots, "01-form-custom")
    if workers:
        wait_workers(base, workers, 30.0)
    form = {"user_count": "1", "spawn_rate": "1", "llm_levels": "abc"}
    refused = http_post(base + "/swarm", form)  # a bad value: a message, nothing starts
    assert refused["success"] is False and "--llm-levels" in refused["message"], refused
    form["llm_levels"] = ",".join(map(str, LEVELS))
    assert http_post(base + "/swarm", form)["success"]
    driver.get(base + "/loadknee/live")  # the live view's own page (the Knee tab shows it too)
    stages_seen: list[int] = []
    tput_by_finished: dict[int, list[list[float]]] = {}
    verdicts_seen: dict[int, str] = {}

    def seen(state: dict[str, Any]) -> None:
        if state["stage"] is None:
            return
        if not stages_seen or stages_seen[-1] != state["stage"]:
            stages_seen.append(state["stage"])
            screenshot(driver, shots, f"stage-{state['stage']}")
        tput_by_finished.setdefault(len(state["verdicts"]), state["tput"])
        for stage, verdict in state["verdicts"]:
            if verdict not in ("…", ""):
                verdicts_seen.setdefault(stage, verdict)

    def in_tab(state: dict[str, Any]) -> bool:
        return bool(state["in_tab"] and state["stage"] is not None)

    _wait_for(driver, lambda s: s["stage"] == 2, "stage 2", seen, SWEEP_TIMEOUT_S)
    # the same view inside the Knee tab, in Locust's light theme and then its dark theme (the
    # toggle keeps its choice in localStorage.theme); every view read here counts as watched
    driver.get(base + "/?tab=knee")
    _wait_for(driver, in_tab, "the live view in the Knee tab", seen)
    screenshot(driver, shots, "knee-tab")
    _js(driver, "localStorage.theme = 'dark';")
    driver.get(base + "/?tab=knee")
    _wait_for(driver, in_tab, "the live view in the dark Knee tab", seen)
    screenshot(driver, shots, "knee-tab-dark")
    _js(driver, "localStorage.removeItem('theme');")
    driver.get(base + "/loadknee/live")
    state = _wait_for(
        driver, lambda s: s["finished"] and s["report"], "the report link", seen, SWEEP_TIMEOUT_S
    )
    screenshot(driver, shots, "end")
    return {
        "stages": stages_seen,
        "tput": tput_by_finished,
        "final": state,
        "verdicts": verdicts_seen,
        "report": state["report"],
    }


def _check_view(seen: dict[str, Any], driver: Any, shots: Path) -> None:
    n_stages = 1 + len(LEVELS)  # baseline + levels
    # the current stage changed through every stage in order (each held >= 4 s, polled each 0.3 s)
    assert seen["stages"] == list(range(n_stages)), seen["stages"]
    # the throughput chart gained one point per finished level (the baseline is no level), in
    # users order, each above zero: the locustfile streams, so every stage has output tokens
    for finished, points in seen["tput"].items():
        assert [x for x, _ in points] == LEVELS[: max(0, finished - 1)], seen["tput"]
    assert len(seen["tput"]) >= 3, seen["tput"]  # seen growing, not only at the end
    final = seen["final"]
    assert [x for x, _ in final["tput"]] == LEVELS and all(y > 0 for _, y in final["tput"]), final
    assert [x for x, _ in final["ttft"]] == LEVELS and all(y > 0 for _, y in final["ttft"]), final
    # every finished stage got the analysis's verdict
    assert set(seen["verdicts"]) == set(range(n_stages)), seen["verdicts"]
    assert seen["verdicts"][0] == "baseline"
    steps = {seen["verdicts"][s] for s in range(1, n_stages)}
    assert steps <= {"comfortable", "critical", "knee", "red line"}, seen["verdicts"]
    driver.get(seen["report"])
    assert "report.html" in driver.current_url
    body = driver.find_element("tag name", "body").text
    assert "knee" in body.lower(), body[:400]
    screenshot(driver, shots, "report")


def _check_numbers(base: str, run_dir: Path) -> None:
    """The Knee tab's finished-stage numbers equal the final ``loadknee analyze`` table."""
    stats = json.loads(http_get(base + "/stats/requests"))
    live = next(e["data"] for e in stats["extended_stats"] if e["key"] == "knee")
    with open(run_dir / "report" / "record.csv", newline="") as f:
        record = {int(r["stage"]): r for r in csv.DictReader(f)}
    assert [row["stage"] for row in live] == sorted(record)
    for row in live:
        rec = record[row["stage"]]
        assert row["phase"] == "done"
        for key in ("e2e_p50_ms", "e2e_p95_ms", "ttft_p50_ms", "ttft_p95_ms"):
            if key in rec and rec[key] != "" and row[key] is not None:
                assert row[key] == pytest.approx(float(rec[key]), abs=0.051), (key, row, rec)


def _sweep(driver: Any, sim: Any, tmp_path: Path, workers: int) -> None:
    out = tmp_path / "runs"
    args = ["--host", sim.url, "--stop-timeout", "10",
            *sweep_args(out, levels="8", stage_s=4.0, baseline=3)]  # fmt: skip
    if workers:
        args += worker_args(workers)
    args += ["--llm-input-tokens", "32", "--llm-output-tokens", "16"]
    shots = tmp_path / "screenshots"
    with web_ui(*args, locustfile=STREAMING) as (base, _):
        seen = _watch(driver, base, shots, workers)
        run_dir = only_run_dir(out)
        _check_numbers(base, run_dir)
        _check_view(seen, driver, shots)
    rd = read_run_dir(only_run_dir(out))
    check_run(rd, levels=LEVELS, baseline=3)
    if workers:
        assert {r["worker"] for r in rd.requests} == {str(i) for i in range(workers)}


def _watched_sweep(workers: int, folder: Path) -> None:
    """One watch in its own chromium against its own simulator (a thread of :func:`watches`)."""
    session = open_browser()
    driver = next(session)
    try:
        with SimProcess.start("fast", allow_control=True) as sim:
            _sweep(driver, sim, folder, workers)
    finally:
        session.close()


@pytest.fixture(scope="module")
def watches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Future[None]]]:
    """Both watches started at once, by worker count; a test re-raises its watch's failure (or
    skip) with ``result()``."""
    with ThreadPoolExecutor(2) as pool:
        yield {
            workers: pool.submit(_watched_sweep, workers, tmp_path_factory.mktemp(f"w{workers}"))
            for workers in (0, 2)
        }


def test_watch_a_sweep_in_chromium(watches: dict[int, Future[None]]) -> None:
    watches[0].result()


def test_watch_a_distributed_sweep_in_chromium(watches: dict[int, Future[None]]) -> None:
    watches[2].result()
