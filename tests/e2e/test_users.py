"""The LLM user classes against real HTTP: every failure kind is a row, calibration is exact.

Locust runs in subprocesses (it monkey-patches with gevent); a listener in
``tests/support/llm_rows_locustfile.py`` dumps each request event (Locust's fields + our row) as
JSONL.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

import pytest

from loadknee_core.contract import OUTCOMES, REQUEST_COLUMNS
from tests.support.fake_llm_server import BEHAVIOURS, FakeLLMServer
from tests.support.llm_locust import LocustResult, run_locust
from tests.support.ports import free_port

EXPECTED = {
    "ok": "ok",
    "http_500": "http_error",
    "cut": "incomplete",
    "malformed": "malformed",
    "stream_error": "stream_error",
    "empty": "empty_response",
    "slow": "timeout",
    "drop": "connect_error",
    "short_usage": "length_mismatch",
    "no_usage": "ok",
}
EXPECTED_WHOLE = {**EXPECTED, "cut": "ok", "no_usage": "ok"}  # no stream to cut


def _check_event_contract(result: LocustResult) -> None:
    """One event per request, with Locust's fields consistent with our row."""
    assert result.events, result.output[-3000:]
    for e in result.events:
        row = e["row"]
        assert set(row) <= set(REQUEST_COLUMNS)
        assert row["outcome"] in OUTCOMES
        assert e["request_type"] == "POST"
        assert e["response_time"] == pytest.approx(row["e2e_ms"])
        locust_failure = row["outcome"] not in ("ok", "length_mismatch")
        assert (e["exception"] is not None) == locust_failure, e
    ids = [e["row"]["request_id"] for e in result.events]
    assert len(ids) == len(set(ids))


@pytest.mark.slow
@pytest.mark.parametrize(("stream", "expected"), [(True, EXPECTED), (False, EXPECTED_WHOLE)])
def test_every_failure_kind_is_a_row(tmp_path: Path, stream: bool, expected: dict) -> None:
    with FakeLLMServer(prompt_tokens=50, completion_tokens=5, slow_s=1.5) as srv:
        extra = ["--llm-model", "fake", "--llm-no-calibrate", "--llm-request-timeout", "0.5"]
        extra += ["--llm-input-tokens", "50", "--llm-output-tokens", "5"]
        if not stream:
            extra.append("--llm-no-stream")
        # one sequential user, one request per behaviour of the server's cycle: the run waits
        # for those requests, not a clock (a loaded machine's 4-s run served only 8 of the 10)
        result = run_locust(
            tmp_path, srv.url, ["Chat"], seconds=60, extra=extra, stop_after_events=len(BEHAVIOURS)
        )
        served = dict(srv.served)
    _check_event_contract(result)
    seen: dict[str, set[str]] = {}
    # the stop may cancel the user's last request (Locust kills a user whose wait ended as the
    # stop came), maybe before it reached the server: one row that says so, nothing more
    cancelled = [r for r in result.rows if r["outcome"] == "cancelled"]
    assert cancelled in ([], result.rows[-1:]), cancelled
    for row in result.rows[: len(result.rows) - len(cancelled)]:
        behaviour = served[row["request_id"]]  # every other row is a request the server saw
        seen.setdefault(behaviour, set()).add(row["outcome"])
    assert set(seen) == set(BEHAVIOURS), result.output[-2000:]
    assert {b: s.pop() for b, s in seen.items() if len(s) == 1} == expected
    by_outcome = {r["outcome"]: r for r in result.rows}
    assert by_outcome["http_error"]["http_status"] == 500
    assert "internal trouble" in by_outcome["http_error"]["error"]
    if stream:
        assert by_outcome["stream_error"]["error"] == "engine died"
        assert by_outcome["incomplete"]["chunks"] == 2
        assert by_outcome["timeout"]["ttft_ms"] is not None  # the first token came, then silence
    no_usage = [r for r in result.rows if served.get(r["request_id"]) == "no_usage"]
    if stream:
        assert no_usage[0]["usage_source"] == "estimate"
        assert no_usage[0]["completion_tokens"] == 5
        assert no_usage[0]["length_ok"] is None
    assert by_outcome["length_mismatch"]["length_ok"] is False


@pytest.mark.slow
def test_refused_connection_is_a_row_and_does_not_spin(tmp_path: Path) -> None:
    port = free_port()
    extra = ["--llm-model", "m", "--llm-no-calibrate"]
    # ten refusals, not a 2-s clock (Locust's -t starts from a stale clock on a loaded machine)
    result = run_locust(tmp_path, f"http://127.0.0.1:{port}", ["Chat"], seconds=60, extra=extra,
                        stop_after_events=10)  # fmt: skip
    _check_event_contract(result)
    outcomes = Counter(r["outcome"] for r in result.rows)
    assert set(outcomes) - {"cancelled"} == {"connect_error"}, outcomes
    assert outcomes["cancelled"] <= 1, outcomes  # the last one, if the stop came mid-connect
    refused = sorted(r["start_unix_s"] for r in result.rows if r["outcome"] == "connect_error")
    assert len(refused) >= 10, outcomes
    # no spin: a 0.1 s back-off after each refused connect (a busy machine only adds to it)
    gaps = [b - a for a, b in itertools.pairwise(refused)]
    assert min(gaps) >= 0.09, gaps
    assert all(r["http_status"] is None for r in result.rows)


@pytest.mark.slow
def test_calibration_exact_on_the_simulator_all_endpoints(tmp_path: Path, sim_server) -> None:
    sim = sim_server("fast")
    extra = ["--llm-input-tokens", "137", "--llm-output-tokens", "9", "--llm-batch-size", "3"]
    # 30 requests, not a 3-s clock (Locust's -t starts from a stale clock on a loaded machine)
    result = run_locust(tmp_path, sim.url, ["Chat", "Completions", "Batch"], users=3, seconds=60,
                        extra=extra, stop_after_events=30)  # fmt: skip
    _check_event_contract(result)
    rows = result.rows
    assert {r["outcome"] for r in rows} == {"ok"}, Counter(r["error"] for r in rows)
    by_name: dict[str, list[dict]] = {}
    for e in result.events:
        by_name.setdefault(e["name"], []).append(e["row"])
    assert set(by_name) == {"chat", "completions", "completions-batch"}
    for name, k in (("chat", 1), ("completions", 1), ("completions-batch", 3)):
        for row in by_name[name]:
            assert row["batch_size"] == k
            assert row["prompt_tokens"] == 137 * k == row["target_input_tokens"]
            assert row["completion_tokens"] == 9 * k == row["target_output_tokens"]
            assert row["length_ok"] is True
            assert row["ttft_ms"] is not None and row["ttft_ms"] <= row["e2e_ms"]
    cal = result.info["calibration"]
    assert set(cal) == {"chat", "completions"}
    assert all(c["calibrated"] and c["exact"] == {"137": c["exact"]["137"]} for c in cal.values())
    assert result.info["model"] == "sim-llm"
    # the server saw exactly our request ids (probes are not rows)
    sim_ids = {r["request_id"] for r in sim.log()}
    assert {r["request_id"] for r in rows} <= sim_ids
    assert len({r["prompt_hash"] for r in rows}) == len(rows)  # unique tags


@pytest.mark.slow
def test_non_streaming_and_replayed_lengths_log(tmp_path: Path, sim_server) -> None:
    sim = sim_server("fast")
    log = tmp_path / "lengths.jsonl"
    log.write_text(
        '{"input_tokens": 40, "output_tokens": 3}\n{"input_tokens": 90, "output_tokens": 5}\n'
    )
    extra = ["--llm-no-stream", "--llm-prompt-log", str(log), "--llm-output-scale", "2"]
    # four requests, not a 2-s clock: Locust's -t counts from gevent's stale start-up time, and
    # a loaded machine (fresh #29) ended the run 29 ms after it began, before calibration ended
    result = run_locust(tmp_path, sim.url, ["Chat"], seconds=60, extra=extra, stop_after_events=4)
    _check_event_contract(result)
    rows = result.rows
    assert {r["outcome"] for r in rows} == {"ok"}, Counter(r["error"] for r in rows)
    assert {(r["prompt_tokens"], r["completion_tokens"]) for r in rows} <= {(40, 6), (90, 10)}
    assert all(r["ttft_ms"] is None and r["stream"] is False for r in rows)
    assert result.info["kind"] == "log_replay"
    assert len(result.info["log_sha256"]) == 64


@pytest.mark.slow
def test_a_log_with_nothing_valid_stops_the_test_with_the_reason(tmp_path: Path) -> None:
    log = tmp_path / "bad.jsonl"
    log.write_text('{"prompt": \n[]\n')
    extra = ["--llm-model", "m", "--llm-prompt-log", str(log)]
    result = run_locust(tmp_path, "http://127.0.0.1:9", ["Chat"], users=2, seconds=30, extra=extra)
    assert result.returncode == 1 and not result.events
    # words are the product: the message a user reads for bad input
    assert "line 1: not valid JSON; line 2: not a JSON object" in result.output
    # words are the product: Locust's own shutdown line
    assert "Shutting down (exit code 1)" in result.output  # at once, not after 30 s
    assert result.info["kind"] == "error"


@pytest.mark.slow
def test_api_key_goes_out_as_bearer_and_nowhere_else(tmp_path: Path) -> None:
    secret = "sk-test-5ecret-value"
    with FakeLLMServer(prompt_tokens=50, completion_tokens=5) as srv:
        extra = ["--llm-no-calibrate", "--llm-api-key-env", "MY_KEY", "--llm-temperature", "0"]
        # until the first request's event, not for 1 s: Locust's -t counts from a clock its
        # start-up left stale, and a loaded machine ended a 1-second run before any request
        result = run_locust(tmp_path, srv.url, ["Chat"], seconds=30, extra=extra,
                            env={"MY_KEY": secret}, stop_after_events=1)  # fmt: skip
        seen = list(srv.headers_seen)
    assert result.events and seen
    assert {h.get("authorization") for h in seen} == {f"Bearer {secret}"}
    assert {h.get("accept-encoding") for h in seen} == {"identity"}
    assert {h.get("x-request-id") for h in seen} >= {r["request_id"] for r in result.rows}
    assert result.info["model"] == "fake"  # discovered from /v1/models
    everything = json.dumps(result.events) + json.dumps(result.info) + result.output
    assert secret not in everything
    assert not any(
        secret in p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()
    )
