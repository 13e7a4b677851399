"""Open loop, small parts: the row's latency from the planned send, and the wrapper's locustfile."""

from __future__ import annotations

import pytest

from loadknee_locust.client.outcome import Observation, request_row
from loadknee_locust.commands import run as runcli


def _row(base: dict) -> dict:
    obs = Observation(start=10.0, end=10.25, complete=True, http_status=200)
    row, _ = request_row(
        obs,
        base={"start_unix_s": 1000.0, **base},
        stream=False,
        batch_size=1,
        target_input_tokens=None,
        target_output_tokens=None,
    )
    return row


def test_latency_from_the_planned_send() -> None:
    row = _row({"intended_unix_s": 999.9, "send_wait_ms": 100.0})
    assert row["e2e_ms"] == pytest.approx(250.0)
    assert row["e2e_intended_ms"] == pytest.approx(350.0)  # the wait is part of the latency


def test_closed_loop_rows_have_none() -> None:
    assert "e2e_intended_ms" not in _row({})


def _command(*argv: str) -> list[str]:
    args, unknown = runcli.build_parser().parse_known_args(list(argv))
    return runcli.locust_command(args, unknown)


@pytest.mark.parametrize(
    ("argv", "locustfile"),
    [
        (["--rates", "1,2"], "openloop.py"),
        (["--arrival-log", "t.jsonl", "--time-scale", "60"], "openloop.py"),
        (["--levels", "1,2"], "default.py"),
    ],
)
def test_the_wrapper_picks_the_open_loop_locustfile(argv: list[str], locustfile: str) -> None:
    cmd = _command("--host", "http://127.0.0.1:1", *argv)
    assert cmd[cmd.index("-f") + 1].endswith(locustfile)


def test_the_wrapper_passes_the_open_loop_options() -> None:
    cmd = _command(
        "--host", "http://127.0.0.1:1", "--rates", "1,2", "--arrivals", "gamma",
        "--burstiness", "0.5", "--max-in-flight", "8",
    )  # fmt: skip
    text = " ".join(cmd)
    for part in ("--llm-rates 1,2", "--llm-arrivals gamma", "--llm-burstiness 0.5"):
        assert part in text
    assert "--llm-max-in-flight 8" in text


def test_rates_and_arrival_log_exclude_each_other() -> None:
    with pytest.raises(SystemExit):
        _command("--rates", "1", "--arrival-log", "x")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rates": "1,x"}, "--llm-rates must be comma-separated numbers"),
        ({"rates": "1", "max_in_flight": 0}, "--llm-max-in-flight must be >= 1"),
        ({"rates": "1", "arrival_log": "x"}, "exclude each other"),
        ({"arrival_log": "/no/such/trace.jsonl"}, "no such file"),
    ],
)
def test_open_loop_options_checked_before_load(options: dict, message: str) -> None:
    from loadknee_locust.plugin.options import LlmOptions
    from loadknee_locust.plugin.validate import option_problems

    problems = option_problems(LlmOptions(**options))
    assert any(message in p for p in problems), problems
    assert option_problems(LlmOptions(rates="1,2")) == []


def test_a_late_open_loop_row_belongs_where_it_was_planned(tmp_path) -> None:
    """A request planned in the measured window but sent after it (a full cap) is measured."""
    from loadknee_locust.record.recorder import RunLog
    from loadknee_locust.sweep.schedule import Schedule, SchedulePlan

    plan = SchedulePlan(
        levels=(1,), stage_seconds=10.0, warmup_seconds=1.0, cooldown_seconds=5.0,
        baseline_requests=0,
    )  # fmt: skip
    run = RunLog(tmp_path)
    run.schedule = Schedule(plan, 1000.0)
    late = {"intended_unix_s": 1009.5, "start_unix_s": 1011.0, "end_unix_s": 1012.0}
    closed = {"start_unix_s": 1011.0, "end_unix_s": 1012.0}
    for row in (late, closed):
        row["outcome"] = "ok"
        run.add(row)  # labels the row in place
    run.close()
    assert (late["stage"], late["phase"]) == (0, "measure")
    assert (closed["stage"], closed["phase"]) == (0, "cooldown")
