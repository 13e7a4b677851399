"""Conversations end to end: ``loadknee run --llm-turns 3 --llm-think-time 1`` on the simulator.

One short real sweep (prefix caching on, a 256-token shared system prompt) and its check against
the simulator's own log, joined on the request id: every conversation's turns arrive in order;
each turn's prompt is the previous turn's plus the previous answer, a new user message and the
template's tokens; the server found the previous turn's prompt in its prefix cache (so the text
was resent, block for block); the pause between an answer and the next turn is the think time
within 5 %; the report tabulates TTFT and e2e by turn. Run with ``--workers 2`` (rows from both
workers; one process runs the same user class in tests/e2e/test_prefix_cache_sim.py and
tests/e2e/test_convlog_sim.py, and this test passed locally too: kept to one run for the suite's
time).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.pipeline import analyze_run
from analysis.report.workload import workload_html, workload_sections
from analysis.report.workload_words import turn_lines
from analysis.report.writer import record_markdown
from analysis.stages.conversations import by_turn, planned_turns
from loadknee_locust.sim.launch import SimProcess

pytestmark = pytest.mark.slow

TURNS, THINK_S, PREFIX, INPUT, OUTPUT = 3, 1.0, 256, 320, 16
TEMPLATE = 3  # the sim's tokens per message and per request (chat_tokens_per_message/constant)


def _run(out: Path, workers: int) -> tuple[Path, pd.DataFrame]:
    with SimProcess.start("fast", enable_prefix_caching=True) as sim:
        args = [
            sys.executable, "-m", "loadknee_locust", "run", "--no-analyze", "--host", sim.url,
            "--levels", "3", "--stage-seconds", "7", "--warmup-seconds", "0.5",
            "--cooldown-seconds", "0.5", "--baseline-requests", "2",
            "--input-tokens", str(INPUT), "--output-tokens", str(OUTPUT),
            "--llm-shared-prefix-tokens", str(PREFIX), "--llm-turns", str(TURNS),
            "--llm-think-time", str(THINK_S), "--out", str(out), "--run-id", f"w{workers}",
            "--no-refine", "--stop-after-knee", "-1", "--workers", str(workers),
            "--no-concurrency-probe",  # tests the turns, not loadknee predict: skip its ~2 s
        ]  # fmt: skip
        done = subprocess.run(args, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        log = pd.DataFrame(sim.log())
    return out / f"w{workers}", log


@pytest.fixture(scope="module", params=[2], ids=["workers2"])  # local: the other sim tests
def run(request, tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    return _run(tmp_path_factory.mktemp("conv"), request.param)


def _joined(run_dir: Path, log: pd.DataFrame) -> pd.DataFrame:
    rows = pd.read_csv(run_dir / "requests.csv", dtype={"conversation_id": "string"})
    rows = rows[rows["conversation_id"].notna()]
    truth = log.set_index("request_id")[["arrival_unix_s", "prompt_tokens", "cached_tokens"]]
    joined = rows.join(truth, on="request_id", rsuffix="_sim")
    assert joined["arrival_unix_s"].notna().all(), "every turn reached the simulator"
    return joined


def test_turns_arrive_in_order_and_carry_the_history(run) -> None:
    run_dir, log = run
    joined = _joined(run_dir, log)
    answered = joined[joined["outcome"] == "ok"]
    complete = 0
    for cid, conv in answered.groupby("conversation_id"):
        conv = conv.sort_values("arrival_unix_s")
        assert list(conv["turn"]) == list(range(len(conv))), cid  # in order, none skipped
        assert conv["user_id"].nunique() == 1
        assert conv["worker"].nunique() == 1  # a conversation stays on its worker
        complete += len(conv) == TURNS
        first = conv.iloc[0]
        assert first["prompt_tokens_sim"] == INPUT  # calibrated: the first turn is the target
        new_turn = INPUT - (TEMPLATE + PREFIX) - TEMPLATE  # a new user message with its template
        for prev, cur in zip(conv.iloc[:-1].itertuples(), conv.iloc[1:].itertuples(), strict=True):
            grown = prev.prompt_tokens_sim + TEMPLATE + prev.completion_tokens + new_turn
            assert cur.prompt_tokens_sim == grown, (cid, cur.turn)
            # the previous prompt, less its generation-prompt tokens, was found block for block
            assert cur.cached_tokens_sim == (prev.prompt_tokens_sim - TEMPLATE) // 16 * 16
            assert cur.cached_tokens == cur.cached_tokens_sim  # the usage said the same
    assert complete >= 3
    assert answered["worker"].nunique() == 2  # conversations ran on both workers


def test_think_time_is_kept_within_5_percent(run) -> None:
    run_dir, log = run
    joined = _joined(run_dir, log).sort_values(["conversation_id", "turn"])
    gaps = []
    for _, conv in joined.groupby("conversation_id"):
        ends, starts = conv["end_unix_s"].to_numpy(), conv["start_unix_s"].to_numpy()
        gaps += list(starts[1:] - ends[:-1])
    assert len(gaps) >= 6
    assert min(gaps) >= THINK_S * 0.99
    assert sum(gaps) / len(gaps) == pytest.approx(THINK_S, rel=0.05)


def test_the_report_shows_latency_by_turn(run) -> None:
    run_dir, _ = run
    analysis = analyze_run(run_dir)
    table = by_turn(analysis.run.requests).set_index("turn")
    assert list(table.index) == list(range(TURNS))
    assert table["prompt_tokens_mean"].is_monotonic_increasing
    # record.md carries the conversations' line and the table by turn, a row per turn
    lines = turn_lines(analysis.run.requests, planned_turns(analysis.run.run_info))
    assert len(lines) == 3 + TURNS and "\n".join(lines) in record_markdown(analysis)


def test_knee_json_and_the_html_report_show_latency_by_turn(run, tmp_path: Path) -> None:
    import json

    from analysis.report.writer import write_report

    run_dir, log = run
    analysis = analyze_run(run_dir)
    paths = write_report(analysis, tmp_path)
    section = json.loads(paths["knee.json"].read_text())["conversations"]
    assert section["turns"] == TURNS and section["conversations"] >= 3
    assert section["completed"] + section["cut"] == section["conversations"]
    served = _joined(run_dir, log)
    served = served[(served["outcome"] == "ok") & served["phase"].isin(["measure", "baseline"])]
    for row in section["by_turn"]:  # each turn's figures from its own rows
        mine = served[served["turn"] == row["turn"]]
        assert row["requests"] == len(mine)
        assert row["prompt_tokens_mean"] == pytest.approx(mine["prompt_tokens_sim"].mean())
        assert row["ttft_p50_ms"] == pytest.approx(mine["ttft_ms"].quantile(0.5))
    # the page's workload section shows the conversations and their table, a row per turn
    page = paths["report.html"].read_text()
    turns = workload_html({"conversations": workload_sections(analysis)["conversations"]})
    assert turns in page and turns.count("<tr><td") == len(section["by_turn"]) == TURNS
