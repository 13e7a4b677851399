"""An open-loop rate run started from the web UI's start form in a real headless chromium: a bad
rate is refused on the form, the typed rates start the run, the live view shows offered vs
served and the backlog while it runs, and after it stops its numbers equal the run's own files
(``requests.csv`` and ``stages.csv`` counted here, and the report's ``knee.json``)."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loadknee_locust.plugin.options import LABELS
from loadknee_locust.sim.params import SimParams
from loadknee_locust.sim.saturation import expected_throughput
from tests.support.browser_support import displayed, open_browser, screenshot
from tests.support.paths import REPO
from tests.support.run_support import (
    child_env,
    free_port,
    http_get,
    locust_cmd,
    only_run_dir,
    wait_for_web_ui,
)

pytestmark = pytest.mark.slow

OPENLOOP = str(REPO / "loadknee_locust" / "locustfiles" / "openloop.py")
SLOTS = 4  # the simulator's batch: about 10 requests/s at 64 in / 32 out
CAPACITY = expected_throughput(SimParams(max_num_seqs=SLOTS), SLOTS + 1, 64, 32) / 32  # requests/s
#: one rate well below the capacity, one past it (test_openloop_sim checks the knee's place)
RATES = (round(0.4 * CAPACITY, 2), round(1.5 * CAPACITY, 2))
RUN_TIMEOUT_S = 90.0

ROWS = """
const box = document.getElementById('lk-live');
if (!box) return null;
const st = box.querySelector('.lk-status');
return {
  finished: st ? st.dataset.finished === '1' : false,
  status: st ? st.textContent : '',
  rows: Array.from(box.querySelectorAll('table.lk-rates tbody tr')).map(r => ({
    stage: Number(r.dataset.stage), rate: Number(r.dataset.rate),
    judged: r.dataset.judged === '1',
    offered: r.dataset.offered === undefined ? null : Number(r.dataset.offered),
    served: r.dataset.served === undefined ? null : Number(r.dataset.served),
    backlog: r.dataset.backlog === undefined ? null : Number(r.dataset.backlog),
    verdict: r.querySelector('.lk-v').textContent})),
  points: Array.from(box.querySelectorAll('svg[data-chart="rates"] circle')).map(
    c => [c.dataset.series, Number(c.dataset.x), Number(c.dataset.y)]),
  banners: Array.from(box.querySelectorAll('.lk-banner')).map(b => b.textContent),
  report: (box.querySelector('a.lk-report') || {}).href || null,
};
"""


@pytest.fixture
def browser() -> Iterator[Any]:
    yield from open_browser()


def _type(field: Any, text: str) -> None:
    """Replace a React input's value as a person does (select all, type)."""
    from selenium.webdriver.common.keys import Keys

    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(Keys.DELETE)
    field.send_keys(text)


def _start_from_the_form(driver: Any, base: str, shots: Path) -> None:
    driver.get(base + "/")
    displayed(driver, "xpath", "//*[text()='Custom parameters']").click()
    rates = displayed(driver, "css selector", "[name='llmRates']")
    note = displayed(driver, "css selector", ".lk-users-note").text
    assert LABELS["rates"] in note and LABELS["levels"] not in note, note  # what drives it
    start = displayed(driver, "xpath", "//button[@type='submit' and text()='Start']")
    _type(rates, "4,abc")  # refused on the form: the message, and nothing starts
    start.click()
    displayed(driver, "xpath", "//*[contains(text(), '--llm-rates must be comma-separated')]")
    state = json.loads(http_get(base + "/stats/requests"))["state"]
    assert state in ("ready", "stopped"), state
    screenshot(driver, shots, "00-refused")
    _type(rates, ",".join(f"{r:g}" for r in RATES))
    screenshot(driver, shots, "01-form")
    start.click()


def _watch(driver: Any, base: str, shots: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The live page until every rate stage is judged and the report link shows; the live
    (not yet judged) rows seen on the way."""
    driver.get(base + "/loadknee/live")
    deadline = time.monotonic() + RUN_TIMEOUT_S
    live: list[dict[str, Any]] = []
    state = None
    while time.monotonic() < deadline:
        state = driver.execute_script(ROWS)
        if state:
            running = [r for r in state["rows"] if not r["judged"] and r["offered"] is not None]
            if running and not live:
                screenshot(driver, shots, "01-running")
            live += running
            judged = [r for r in state["rows"] if r["judged"]]
            if state["finished"] and state["report"] and len(judged) == len(RATES):
                screenshot(driver, shots, "02-end")
                return state, live
        time.sleep(0.3)
    raise AssertionError(f"the judged rate stages and the report: not seen; last view {state}")


def _windows(run_dir: Path) -> dict[int, tuple[float, float]]:
    with open(run_dir / "stages.csv", newline="") as f:
        return {
            int(r["stage"]): (float(r["warmup_end_unix_s"]), float(r["measure_end_unix_s"]))
            for r in csv.DictReader(f)
            if r["kind"] == "step"
        }


def _offered_from_the_rows(run_dir: Path) -> dict[int, float]:
    """Planned sends in each stage's measured window per second, counted from requests.csv."""
    windows = _windows(run_dir)
    counts = dict.fromkeys(windows, 0)
    with open(run_dir / "requests.csv", newline="") as f:
        for row in csv.DictReader(f):
            stage = int(row["stage"]) if row["stage"] else -1
            if stage in windows and row["intended_unix_s"]:
                start, stop = windows[stage]
                counts[stage] += start <= float(row["intended_unix_s"]) < stop
    return {s: counts[s] / (stop - start) for s, (start, stop) in windows.items()}


def test_an_open_loop_run_from_the_form_in_chromium(browser, sim_server, tmp_path: Path) -> None:
    sim = sim_server(preset="fast", max_num_seqs=SLOTS)
    out, port = tmp_path / "runs", free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = locust_cmd(
        "--web-host", "127.0.0.1", "--web-port", str(port), "--host", sim.url,
        "--stop-timeout", "10", "--llm-out", str(out), "--llm-rates", "1",
        "--llm-stage-seconds", "5", "--llm-warmup-seconds", "1",
        "--llm-cooldown-seconds", "0.5", "--llm-baseline-requests", "3",
        "--llm-input-tokens", "64", "--llm-output-tokens", "32",
        "--llm-max-in-flight", "64", locustfile=OPENLOOP,
    )  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=child_env())  # fmt: skip
    shots = tmp_path / "screenshots"
    try:
        wait_for_web_ui(base)
        _start_from_the_form(browser, base, shots)
        final, live = _watch(browser, base, shots)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    run_dir = only_run_dir(out)
    info = json.loads((run_dir / "run.json").read_text())
    assert info["parameters"]["llm_rates"] == ",".join(f"{r:g}" for r in RATES)  # the form's
    # while a stage ran, the view showed the master's own numbers: offered near the planned
    # rate, a backlog count, and never more served than offered
    assert live, "no live (not yet judged) rate row seen while the run ran"
    assert all(r["backlog"] is not None and r["served"] <= r["offered"] + 1e-9 for r in live), live
    # after the stop: one row per rate, judged, equal to the run's own files
    rows = final["rows"]
    assert [r["rate"] for r in rows] == list(RATES), rows
    offered = _offered_from_the_rows(run_dir)
    assert [r["stage"] for r in rows] == sorted(offered), (rows, offered)
    knee = json.loads((run_dir / "report" / "knee.json").read_text())
    by_stage = {s["stage"]: s for s in knee["rate_stages"]}
    for row in rows:
        assert row["offered"] == pytest.approx(offered[row["stage"]], rel=1e-9), (row, offered)
        rec = by_stage[row["stage"]]
        assert row["served"] == pytest.approx(rec["served_rps"], rel=1e-9), (row, rec)
        assert row["backlog"] == pytest.approx(rec["backlog_mean"], rel=1e-9), (row, rec)
        assert row["verdict"] == rec["rate_verdict"], (row, rec)
    # the chart draws the same offered and served figures at each planned rate
    for name in ("offered", "served"):
        drawn = sorted((x, y) for series, x, y in final["points"] if series == name)
        want = [(r["rate"], pytest.approx(r[name], rel=1e-5)) for r in rows]
        assert drawn == want, (name, final["points"])
    # the rate knee in the report's words, as the banner said it before the report was read
    assert any(knee["rate_knee"]["text"] in b for b in final["banners"]), final["banners"]
