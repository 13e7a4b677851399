"""``loadknee trace``: each fixture end to end (table, JSON, PNG, no prompt text), and the headroom
to a run whose capacity is known by construction."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from analysis.traffic import cli
from tests.support.check_cases import CAPACITY, arrivals_log, saturating_run
from tests.support.check_cases import request_log as _log
from tests.support.paths import DATA

DATA = DATA / "traces"


def _trace(tmp_path: Path, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = cli.main([*args, "--out", str(tmp_path / "out"), "--tz", "UTC"])
    return rc, capsys.readouterr().out


@pytest.mark.parametrize(
    "name", ["mooncake.jsonl", "azure.csv", "burstgpt.csv", "log.jsonl", "log.csv"]
)
def test_each_fixture_gives_a_table_json_and_plot_without_prompt_text(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = _trace(tmp_path, str(DATA / name), capsys=capsys)
    assert rc == 0
    data = json.loads((tmp_path / "out" / f"{name}.trace.json").read_text())
    shape = data["shape"]  # the table prints the JSON's numbers: arrivals, in flight, input tok
    assert f" {shape['mean_rate_per_s']:.3g}/s" in out
    tok = shape["input_tokens"]
    assert re.search(rf" {tok['p50']:g}\b.* {tok['p95']:g}\b.* {tok['max']:g}\n", out), out
    flight = shape["inflight"]
    if flight is None:  # the row says how to get it
        assert "--latency-seconds" in out and "--against" in out
    else:
        assert re.search(rf" {flight['p50']:g}\b.* {flight['p95']:g}\b.* {flight['max']:g}\b", out)
    assert data["log"]["used"] == data["shape"]["requests"] + data["shape"]["order"]["left_out"]
    assert (tmp_path / "out" / f"{name}.trace.png").stat().st_size > 1000
    for path in (tmp_path / "out").iterdir():
        assert b"SECRET-TEXT" not in path.read_bytes()
    assert "SECRET-TEXT" not in out


def test_headroom_to_a_run_of_known_capacity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = saturating_run(tmp_path / "run")
    # peak 5 in flight: five overlapping requests at 10 s; P95 over time 2
    intervals = [(float(i), 1.5) for i in range(60)] + [(10.0 + 0.1 * k, 1.0) for k in range(3)]
    log = _log(tmp_path / "prod.jsonl", intervals)
    rc, out = _trace(tmp_path, str(log), "--against", str(run), "--no-plot", capsys=capsys)
    assert rc == 0
    data = json.loads((tmp_path / "out" / "prod.jsonl.trace.json").read_text())
    room = data["headroom"]
    assert data["capacity"]["users"] == CAPACITY and data["capacity"]["kind"] == "knee"
    assert room["peak"] == 5 and room["allowed"] == CAPACITY
    assert room["ratio"] == pytest.approx(CAPACITY / 5)
    assert room["breaking_scale"] == 1.75  # 5 × 1.5 = 7.5 fits in 8, 5 × 1.75 does not
    assert room["breaks_at_s"] == pytest.approx(1_767_603_610.0)  # the bin of the burst
    assert room["p95"] == 2 and room["lower_bound"] is False
    assert "2026-01-05 09:00:10" in out


def test_littles_law_uses_the_runs_light_load_latency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = saturating_run(tmp_path / "run")
    path = arrivals_log(tmp_path / "arrivals.jsonl")  # 20 requests/s for 60 s, no durations
    rc, _ = _trace(tmp_path, str(path), "--against", str(run), "--no-plot", capsys=capsys)
    assert rc == 0
    shape = json.loads((tmp_path / "out" / "arrivals.jsonl.trace.json").read_text())["shape"]
    # L = λ·W = 20/s × 0.4 s (the 1-user step's e2e)
    assert shape["inflight_source"] == "latency" and shape["inflight"]["p50"] == 8
    latency = json.loads((tmp_path / "out" / "arrivals.jsonl.trace.json").read_text())["capacity"]
    assert latency["latency"]["mean_s"] == pytest.approx(0.4)  # the 1-user step (light load)


def test_a_run_without_a_knee_gives_a_lower_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = saturating_run(tmp_path / "run", levels=(1, 2, 4))
    log = _log(tmp_path / "prod.jsonl", [(0.0, 2.0), (1.0, 2.0)])
    rc, _ = _trace(tmp_path, str(log), "--against", str(run), "--no-plot", capsys=capsys)
    assert rc == 0
    data = json.loads((tmp_path / "out" / "prod.jsonl.trace.json").read_text())
    assert (data["capacity"]["kind"], data["capacity"]["users"]) == ("tested", 4)  # no knee up to 4
    room = data["headroom"]  # at least 4 against a peak of 2: at least 2×
    assert (room["peak"], room["allowed"], room["lower_bound"], room["ratio"]) == (2, 4, True, 2.0)
    assert room["breaking_scale"] is None


def test_an_unreadable_log_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([str(tmp_path / "missing.jsonl"), "--out", str(tmp_path)]) == 2
    # words are the product: the message a user reads for bad input
    assert "loadknee trace:" in capsys.readouterr().err


def test_a_run_tested_below_the_peak_cannot_tell_the_headroom(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = saturating_run(tmp_path / "run", levels=(1, 2))
    log = _log(tmp_path / "prod.jsonl", [(0.0, 2.0), (0.5, 2.0), (1.0, 2.0)])
    rc, _ = _trace(tmp_path, str(log), "--against", str(run), "--no-plot", capsys=capsys)
    assert rc == 0
    data = json.loads((tmp_path / "out" / "prod.jsonl.trace.json").read_text())
    assert (data["capacity"]["kind"], data["capacity"]["users"]) == ("tested", 2)  # no knee up to 2
    room = data["headroom"]  # at least 2, below the peak of 3: cannot tell, and no breaking time
    assert (room["peak"], room["allowed"], room["lower_bound"]) == (3, 2, True)
    assert (room["breaking_scale"], room["breaks_at_s"]) == (None, None)


def test_a_peak_past_the_knee_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = saturating_run(tmp_path / "run")
    log = _log(tmp_path / "prod.jsonl", [(0.1 * k, 2.0) for k in range(12)])
    rc, out = _trace(tmp_path, str(log), "--against", str(run), "--no-plot", capsys=capsys)
    assert rc == 0
    data = json.loads((tmp_path / "out" / "prod.jsonl.trace.json").read_text())
    assert (data["capacity"]["kind"], data["capacity"]["users"]) == ("knee", 8)
    room = data["headroom"]  # the peak of 12 already past the knee's 8, from the first bin
    assert (room["peak"], room["lower_bound"], room["ratio"]) == (12, False, pytest.approx(8 / 12))
    assert room["breaking_scale"] == 1.0
    assert room["breaks_at_s"] == pytest.approx(1_767_603_600.0)  # 2026-01-05 09:00:00 UTC
    assert "2026-01-05 09:00:00" in out


@pytest.mark.parametrize(
    ("slo", "allowed", "says"),
    [
        ("e2e_p95_ms=500", 8, "allow 8: 1.6× headroom"),  # 400 ms up to 8 users, 800 ms at 16
        ("e2e_p95_ms=1000", 8, "allow 16, the knee 8: the knee binds: 1.6× headroom"),
        ("e2e_p95_ms=300", None, "cannot tell: no tested level met the SLOs"),
    ],
)
def test_slo_capacity_is_what_the_run_allows_unless_the_knee_comes_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], slo: str, allowed: int | None, says: str
) -> None:
    run = saturating_run(tmp_path / "run")
    log = _log(tmp_path / "prod.jsonl", [(0.1 * k, 2.0) for k in range(5)])  # peak 5
    rc, out = _trace(
        tmp_path, str(log), "--against", str(run), "--slo", slo, "--no-plot", capsys=capsys
    )
    assert rc == 0
    data = json.loads((tmp_path / "out" / "prod.jsonl.trace.json").read_text())
    assert data["capacity"]["users"] == allowed
    assert says in out


def test_a_log_with_no_readable_time_exits_1_and_names_its_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('junk SECRET-TEXT\n{"prompt": "SECRET-TEXT"}\n')
    rc, out = _trace(tmp_path, str(path), "--no-plot", capsys=capsys)
    assert rc == 1
    # words are the product: the message a user reads for bad input
    assert "line 1: not valid JSON" in out and "line 2: no time field" in out
    # words are the product: the message a user reads for bad input
    assert "no request with a readable time" in out and "SECRET-TEXT" not in out


def test_a_byte_order_mark_does_not_cost_the_first_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_text('\ufeff{"timestamp": 1, "input_length": 5, "output_length": 2}\n', "utf-8")
    rc, _ = _trace(tmp_path, str(path), "--no-plot", capsys=capsys)
    log = json.loads((tmp_path / "out" / "bom.jsonl.trace.json").read_text())["log"]
    assert rc == 0 and (log["format"], log["records"], log["used"]) == ("mooncake", 1, 1)
