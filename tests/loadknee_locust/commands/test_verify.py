"""analysis.compare.verify's checks on record tables typed in as data, and verify's re-run
arguments."""

from __future__ import annotations

import argparse

import pytest

from analysis.compare.verify import EXIT_CODES, format_checks, overall, verify_levels
from loadknee_locust.commands.verify import run_arguments
from tests.support.check_cases import (
    BEFORE_P95,
    BEFORE_TOK,
    BUSY,
    busy_checks,
    knee_table,
    rerun_checks,
    unmeasured_checks,
)


def test_the_levels_are_max_concurrency_watermark_and_knee():
    _, knee = knee_table(BEFORE_TOK, BEFORE_P95)
    assert (knee.max_concurrency, knee.knee_users) == (12, 16)
    assert verify_levels(knee, [8, 9]) == (9, 12, 16)
    assert verify_levels(knee, None) == (12, 16)


def test_an_unchanged_server_passes_every_check():
    checks = rerun_checks("unchanged")
    assert all(c.passed for c in checks.values()), checks
    throughput = checks["throughput"]
    assert round(throughput.moved_pct, 1) == -2.6 and round(throughput.allowed_pct, 1) == 10.0
    # words are the product: the PASS/FAIL line a rollout script gates on
    assert format_checks(list(checks.values())).endswith("verify: PASS (3 of 3 checks passed)")


def test_half_the_slots_fails_the_level_and_the_throughput():
    checks = rerun_checks("half the slots")
    level = checks["recommended_level"]
    assert not level.passed and (level.users, level.verdict) == (12, "knee")
    throughput = checks["throughput"]
    assert not throughput.passed
    assert (throughput.users, throughput.after_tok_s, throughput.before_tok_s) == (12, 600, 1150)
    assert throughput.before_hw_pct == 2.0 and round(throughput.moved_pct, 1) == -47.8
    assert checks["no_red_line_below_knee"].passed
    text = format_checks(list(checks.values()))
    assert text.splitlines()[0].startswith("FAIL  recommended_level")
    # words are the product: the PASS/FAIL line a rollout script gates on
    assert text.endswith("verify: FAIL (1 of 3 checks passed)")


def test_a_red_line_below_the_knee_fails():
    red = rerun_checks("red line below the knee")["no_red_line_below_knee"]
    assert not red.passed
    assert (red.red_line_users, red.users) == ((8,), 16)  # below the knee, at 16 users
    assert red.checked_users == (4, 8, 12)


def test_an_unmeasured_level_fails_rather_than_passes():
    checks = unmeasured_checks()
    assert [c.passed for c in checks] == [False, False, True]  # 4 users: no red line
    assert (checks[0].users, checks[0].verdict) == (12, None)  # not measured again


def test_rerun_arguments_carry_the_original_prompt_settings():
    info = {
        "model": "m", "endpoint": "chat", "stream": False,
        "prompt_source": {"kind": "fixed", "target_input_tokens": 512,
                          "target_output_tokens": 64},
        "parameters": {"llm_stage_seconds": 120.0},
    }  # fmt: skip
    ns = argparse.Namespace(
        host="http://h:1", stage_seconds=None, warmup_seconds=3.0, baseline_requests=10,
        prompt_log=None,
    )  # fmt: skip
    args = run_arguments(info, (9, 12, 16), ns, "r-verify", "/tmp/x")
    pairs = {flag: args[i + 1] for i, flag in enumerate(args[:-1]) if flag.startswith("--")}
    assert pairs["--levels"] == "9,12,16"
    assert pairs["--stage-seconds"] == "20"  # short: the original's 120 s capped
    assert (pairs["--input-tokens"], pairs["--output-tokens"]) == ("512", "64")
    assert (pairs["--model"], pairs["--endpoint"]) == ("m", "chat")
    assert "--no-stream" in args
    assert "--no-refine" in args  # the named levels only, no refine stages between them


@pytest.mark.parametrize(
    ("case", "throughput", "result", "why"),
    [
        (
            "slower, machine overloaded at 12 users",
            "CANNOT TELL",
            "CANNOT TELL",
            "-12.2 % where the server waited for the CPU: the machine's figure, exit 3",
        ),
        (
            "slower, machine overloaded at 24 users only",
            "FAIL",
            "FAIL",
            "the level checked (12) was not overloaded: the failure is the server's",
        ),
        (
            "half the slots, machine overloaded at 12 users",
            "CANNOT TELL",
            "FAIL",
            "the recommended level is the knee: that failure stands whatever the machine did",
        ),
        (
            "unchanged, machine overloaded at 12 users",
            "PASS",
            "PASS",
            "a check that passes on a busy machine passes",
        ),
    ],
)
def test_a_throughput_failure_on_an_overloaded_shared_machine_cannot_tell(
    case, throughput, result, why
):
    checks = busy_checks(case)
    check = checks["throughput"]
    assert check.outcome == throughput, why
    assert (check.overloaded is not None) == (throughput == "CANNOT TELL"), why
    if check.overloaded is not None:
        assert (check.overloaded.users, check.overloaded.host_load_1m) == (12, BUSY[case][2])
    assert overall(list(checks.values())) == result, why
    assert EXIT_CODES[result] == {"PASS": 0, "FAIL": 1, "CANNOT TELL": 3}[result]
    # words are the product: the line a rollout script gates on
    assert format_checks(list(checks.values())).splitlines()[-1].startswith(f"verify: {result} ")


def test_without_the_machine_the_slower_rerun_fails():
    checks = rerun_checks("slower at 12 users")
    assert [c.outcome for c in checks.values()] == ["PASS", "FAIL", "PASS"]
    assert round(checks["throughput"].moved_pct, 1) == -12.2
