"""``loadknee run`` stops before any load on a wrong target, with exit 2 and no run directory."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from loadknee_core.contract import REQUEST_COLUMNS, REQUESTS_CSV
from loadknee_locust.commands import run as run_cmd
from loadknee_locust.commands.failures import all_failed_text
from loadknee_locust.commands.preflight import PreflightError, Target, preflight_server
from tests.support.loopback_http import QuietHandler, loopback_server
from tests.support.run_support import free_port


def _run(capsys, out: Path, *args: str) -> tuple[int, str]:
    rc = run_cmd.main([*args, "--out", str(out), "--levels", "1", "--stage-requests", "2"])
    return rc, capsys.readouterr().err


def test_dead_host_fails_fast_without_a_run_dir(tmp_path, capsys):
    """Nothing listening: this exited 0 after 117 refused requests and left a run directory."""
    out = tmp_path / "runs"
    rc, err = _run(capsys, out, "--host", f"http://127.0.0.1:{free_port()}")
    assert rc == 2
    # words are the product: the pre-flight refusal a user reads
    assert "stopped before any load" in err and "Connection refused" in err and "--host" in err
    assert not out.exists()


def test_missing_and_invalid_prompt_logs_fail_fast(tmp_path, capsys, sim_server):
    sim = sim_server()
    out = tmp_path / "runs"
    rc, err = _run(capsys, out, "--host", sim.url, "--prompt-log", str(tmp_path / "no.jsonl"))
    # words are the product: the pre-flight refusal a user reads
    assert rc == 2 and "--prompt-log" in err and "no such file" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n{\n")
    rc, err = _run(capsys, out, "--host", sim.url, "--prompt-log", str(bad))
    # words are the product: the pre-flight refusal a user reads
    assert rc == 2 and "has no valid record" in err
    assert not out.exists()


def test_wrong_model_fails_fast_and_names_the_served_ones(tmp_path, capsys, sim_server):
    sim = sim_server()
    out = tmp_path / "runs"
    rc, err = _run(capsys, out, "--host", sim.url, "--model", "no-such-model")
    # words are the product: the pre-flight refusal a user reads
    assert rc == 2 and "--model no-such-model is not served" in err
    served, _, _ = preflight_server(
        Target(sim.url, "", "chat", True, "OPENAI_API_KEY", "", str(out))
    )
    assert served in err  # the discovered id is what the error offered instead
    assert not out.exists()


def test_a_stream_without_content_is_caught(tmp_path):
    class NoContent(QuietHandler):
        def do_GET(self):  # /v1/models
            self.send_json(200, {"data": [{"id": "m"}]})

        def do_POST(self):
            self.stream_deltas({"role": "assistant"})

    with loopback_server(NoContent) as host:
        with pytest.raises(PreflightError, match=r"no content chunk.*--no-stream"):
            preflight_server(Target(host, "", "chat", True, "", "", str(tmp_path)))
        # not streamed, the same server's JSON-less answer is caught too
        with pytest.raises(PreflightError, match="not JSON"):
            preflight_server(Target(host, "m", "chat", False, "", "", str(tmp_path)))


def test_a_run_whose_every_request_failed_is_named_with_its_causes(tmp_path):
    rows = [("timeout", "", "read timed out")] * 2 + [("http_error", "503", "")] * 5
    rows += [("cancelled", "", "user stopped before the response")]  # the stop's: not counted
    with (tmp_path / REQUESTS_CSV).open("w", newline="") as f:
        writer = csv.DictWriter(f, REQUEST_COLUMNS)
        writer.writeheader()
        for outcome, status, error in rows:
            writer.writerow({"outcome": outcome, "http_status": status, "error": error})
    # words are the product: the pre-flight refusal a user reads
    assert all_failed_text(tmp_path) == (
        "all 7 requests failed (5 × HTTP 503, 2 × read timed out); nothing to analyse"
    )


def test_errors_name_the_flags_typed_and_help_shows_defaults(tmp_path, capsys):
    """--stage-seconds 4 alone failed naming --llm-warmup-seconds (30), a flag never typed, and
    then printed a run directory that was never created. The warm-up now follows the stage
    (sweep/phase_defaults.py): 4 s alone passes the checks and stops only at the pre-flight (no
    server on port 9); a warm-up typed longer than the stage is named as typed."""
    out = tmp_path / "runs"
    rc = run_cmd.main(["--host", "http://127.0.0.1:9", "--stage-seconds", "4", "--out", str(out)])
    captured = capsys.readouterr()
    # words are the product: the pre-flight refusal a user reads
    assert rc == 2 and "must exceed" not in captured.err
    # words are the product: the pre-flight refusal a user reads
    assert "stopped before any load" in captured.err  # the options passed; the host did not
    assert "run directory" not in captured.out and not out.exists()
    rc = run_cmd.main(["--host", "http://127.0.0.1:9", "--stage-seconds", "4",
                       "--warmup-seconds", "5", "--out", str(out)])  # fmt: skip
    captured = capsys.readouterr()
    # words are the product: the pre-flight refusal a user reads
    assert rc == 2 and "--stage-seconds (4) must exceed --warmup-seconds (5):" in captured.err
    assert "--llm-" not in captured.err and not out.exists()
    rc = run_cmd.main(["--host", "http://h", "--run-time", "10", "--stage-requests", "x"])
    assert rc == 2 and "--llm-" not in capsys.readouterr().err
    assert run_cmd.main(["--help-all"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    for default in ("(default 120)", "(default 20)", "(default auto: a quarter of"):
        assert default in help_text, default


def test_a_web_server_is_named_as_one_not_dumped_as_html(tmp_path):
    """An nginx 404 page answered /v1/models: the error carried its raw HTML, cut mid-tag."""

    class Nginx(QuietHandler):
        def do_GET(self):
            body = b"<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>" + b"x" * 500
            self.send_body(404, body, "text/html")

    with loopback_server(Nginx) as host:
        with pytest.raises(PreflightError) as caught:
            preflight_server(Target(host, "", "chat", True, "", "", str(tmp_path)))
        message = str(caught.value)
        # words are the product: the pre-flight refusal a user reads
        assert "HTTP 404 with a web page, not an OpenAI-compatible LLM API" in message
        assert "<" not in message and "\n" not in message
        with pytest.raises(PreflightError, match=f"drop the /v1 from --host.*--host {host}$"):
            preflight_server(Target(host + "/v1/", "", "chat", True, "", "", str(tmp_path)))


#: preset → (the limit the pre-flight's bursts show, the slots read, the KV budget it must hold)
PROBE_CASES = {
    "fast": ("slots", 8, None),
    "kv-bound": ("kv", None, 4096),
}


@pytest.mark.parametrize(
    ("preset", "limit", "slots", "budget"),
    [(preset, *case) for preset, case in PROBE_CASES.items()],
    ids=list(PROBE_CASES),
)
def test_the_concurrency_probe_tells_the_simulators_slots_from_its_kv_budget(
    sim_server, tmp_path, preset, limit, slots, budget
) -> None:
    from analysis.predict.limits_probe import read_probe
    from loadknee_locust.commands.preflight import probe_limits

    sim = sim_server(preset)
    target = Target(sim.url, "", "chat", True, "", "", str(tmp_path))
    bursts = probe_limits(target, "sim-llm", 256)
    assert [b["failed"] for b in bursts] == [0, 0]
    served = [r for r in sim.log() if r["stream"]]
    assert len(served) == 2 * 32 and {r["outcome"] for r in served} == {"ok"}
    # one burst after the other: the server's own count of each one's prompt tokens is kept
    for burst, records in zip(bursts, (served[:32], served[32:]), strict=True):
        assert {r["prompt_tokens"] for r in records} == {burst["prompt_tokens"]}
    assert 2 * bursts[0]["prompt_tokens"] - bursts[1]["prompt_tokens"] in range(-16, 17)
    assert {r["completion_tokens"] for r in served} == {16}
    reading = read_probe({"prompt_source": {"concurrency_probes": bursts}})
    assert reading is not None and (reading.limit, reading.slots) == (limit, slots)
    if budget is not None:
        assert reading.kv_tokens is not None
        assert reading.kv_tokens.low <= budget < reading.kv_tokens.high


def test_the_concurrency_probe_pins_its_lengths_only_where_the_run_does(tmp_path) -> None:
    """With the run's ``--no-ignore-eos`` (a server that refuses the field) the probe's bodies
    carry neither ``ignore_eos`` nor ``min_tokens``."""
    import json as json_module

    from loadknee_locust.commands.preflight import probe_limits

    bodies: list[dict] = []

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            bodies.append(json_module.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(500)
            self.end_headers()

    with loopback_server(Handler) as url:
        target = Target(url, "", "chat", True, "", "", str(tmp_path))
        assert probe_limits(target, "m", 8, pin=False) == []  # every request failed: no burst
        unpinned, bodies[:] = list(bodies), []
        probe_limits(target, "m", 8)
    # (a plain test server's listen backlog may refuse some of a burst's 32 connections)
    assert unpinned and bodies
    assert not any("ignore_eos" in b or "min_tokens" in b for b in unpinned)
    assert all(b["ignore_eos"] and b["min_tokens"] == 16 for b in bodies)
