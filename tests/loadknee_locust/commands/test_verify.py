"""analysis.compare.verify's checks on record tables typed in as data, and verify's re-run
arguments."""

from __future__ import annotations

import argparse

from analysis.compare.verify import format_checks, verify_checks, verify_levels
from analysis.knee.find import find_knee
from analysis.stages.baseline import compute_baseline
from loadknee_locust.commands.verify import run_arguments
from tests.support.knee_frames import sweep

LEVELS = [4, 8, 12, 16, 24]
BEFORE_TOK = [400.0, 790.0, 1150.0, 1170.0, 1175.0]
BEFORE_P95 = [210.0, 230.0, 260.0, 700.0, 1000.0]


def _table(tok, p95, **columns):
    summary = sweep(LEVELS, tok, p95, baseline_tok_s=100.0, baseline_p95_ms=200.0, **columns)
    return summary, find_knee(summary, compute_baseline(None, summary))


def _checks(after_tok, after_p95, **columns):
    before, before_knee = _table(BEFORE_TOK, BEFORE_P95, output_tok_s_hw_pct=[2.0] * 5)
    after, after_knee = _table(after_tok, after_p95, **columns)
    return {c.name: c for c in verify_checks(before, before_knee, after, after_knee)}


def test_the_levels_are_max_concurrency_watermark_and_knee():
    _, knee = _table(BEFORE_TOK, BEFORE_P95)
    assert (knee.max_concurrency, knee.knee_users) == (12, 16)
    assert verify_levels(knee, [8, 9]) == (9, 12, 16)
    assert verify_levels(knee, None) == (12, 16)


def test_an_unchanged_server_passes_every_check():
    checks = _checks([405.0, 780.0, 1120.0, 1180.0, 1170.0], [215.0, 240.0, 270.0, 720.0, 990.0])
    assert all(c.passed for c in checks.values()), checks
    throughput = checks["throughput"]
    assert round(throughput.moved_pct, 1) == -2.6 and round(throughput.allowed_pct, 1) == 10.0
    # words are the product: the PASS/FAIL line a rollout script gates on
    assert format_checks(list(checks.values())).endswith("verify: PASS (3 of 3 checks passed)")


def test_half_the_slots_fails_the_level_and_the_throughput():
    # 6 slots: 8 users already queue; 12 users serve what 6 did
    checks = _checks([400.0, 590.0, 600.0, 600.0, 600.0], [210.0, 420.0, 600.0, 800.0, 1200.0])
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
    checks = _checks(
        [400.0, 780.0, 1150.0, 1170.0, 1170.0], [210.0, 230.0, 260.0, 700.0, 1000.0],
        errors=[0, 100, 0, 0, 0],
    )  # fmt: skip
    red = checks["no_red_line_below_knee"]
    assert not red.passed
    assert (red.red_line_users, red.users) == ((8,), 16)  # below the knee, at 16 users
    assert red.checked_users == (4, 8, 12)


def test_an_unmeasured_level_fails_rather_than_passes():
    before, before_knee = _table(BEFORE_TOK, BEFORE_P95)
    after = sweep([4], [400.0], [210.0], baseline_tok_s=100.0, baseline_p95_ms=200.0)
    after_knee = find_knee(after, compute_baseline(None, after))
    checks = verify_checks(before, before_knee, after, after_knee)
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
