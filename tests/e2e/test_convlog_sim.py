"""Recorded conversations replayed (``--llm-replay-conversations``): turns in order, gaps scaled.

A JSONL log of three recorded chats (three turns each, every body holding the history as a chat
client resends it, ``timestamp`` 0 / 2 / 4 s) is replayed with ``--llm-gap-scale 0.5`` against
the simulator with prefix caching. Checked against the simulator's log: each conversation's turns
arrive in the recorded order, each turn's prompt is the recorded body's length (plus the one tag
of its conversation), each turn found the earlier turns' shared blocks in the prefix cache (the
same tag on every turn), and each turn started at its recorded offset × 0.5 within 5 %.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from loadknee_locust.prompts.convlog import ConversationLog
from loadknee_locust.sim.launch import SimProcess
from loadknee_locust.sim.tokenizer import count_chat_tokens

pytestmark = pytest.mark.slow

WORDS = "the sun was warm and the sky was blue so we went out for a long walk on the old road"
TAG_TOKENS = 7  # "ref" + six tag words, one token each on the simulator
OFFSETS, SCALE = (0.0, 2.0, 4.0), 0.5


def _log(path: Path) -> dict[str, list[int]]:
    """Write the log; return each conversation's prompt tokens per turn as recorded (untagged)."""
    lengths: dict[str, list[int]] = {}
    with path.open("w") as f:
        for c in range(3):
            history: list[dict[str, str]] = []
            for turn, at in enumerate(OFFSETS):
                history = [*history, {"role": "user", "content": f"{WORDS} {c} {turn}"}]
                body = {"conversation_id": f"chat-{c}", "turn": turn, "timestamp": 1e9 + at,
                        "messages": history, "max_tokens": 8, "output_tokens": 8}  # fmt: skip
                f.write(json.dumps(body) + "\n")
                lengths.setdefault(f"chat-{c}", []).append(
                    count_chat_tokens(history, per_message=3, constant=3)
                )
                history = [*history, {"role": "assistant", "content": WORDS[:40]}]
        f.write(json.dumps({"messages": [{"role": "user", "content": "no id"}]}) + "\n")
    return lengths


def test_the_log_groups_turns_in_order(tmp_path: Path) -> None:
    _log(tmp_path / "chats.jsonl")
    log = ConversationLog(tmp_path / "chats.jsonl", seed=1)
    assert log.info()["conversations"] == 3 and log.info()["records_without_conversation_id"] == 1
    turns = log.next_conversation()
    assert [at for _, at in turns] == list(OFFSETS)
    assert [len(entry.messages or ()) for entry, _ in turns] == [1, 3, 5]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> tuple[Path, pd.DataFrame, dict[str, list[int]]]:
    out = tmp_path_factory.mktemp("convlog")
    lengths = _log(out / "chats.jsonl")
    with SimProcess.start("fast", enable_prefix_caching=True) as sim:
        args = [
            sys.executable, "-m", "loadknee_locust", "run", "--no-analyze", "--host", sim.url,
            "--levels", "2", "--stage-seconds", "6", "--warmup-seconds", "0.5",
            "--cooldown-seconds", "0.5", "--baseline-requests", "2",
            "--prompt-log", str(out / "chats.jsonl"), "--llm-replay-conversations",
            "--llm-gap-scale", str(SCALE), "--out", str(out), "--run-id", "replay",
            "--no-refine", "--stop-after-knee", "-1",
            "--no-concurrency-probe",  # tests the replay, not loadknee predict: skip its ~2 s
        ]  # fmt: skip
        done = subprocess.run(args, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        log = pd.DataFrame(sim.log())
    return out / "replay", log, lengths


def test_recorded_turns_replay_in_order_with_their_gaps(replayed) -> None:
    run_dir, log, lengths = replayed
    rows = pd.read_csv(run_dir / "requests.csv", dtype={"conversation_id": "string"})
    rows = rows[rows["conversation_id"].notna() & (rows["outcome"] == "ok")]
    truth = log.set_index("request_id")[["arrival_unix_s", "prompt_tokens", "cached_tokens"]]
    joined = rows.join(truth, on="request_id", rsuffix="_sim")
    recorded = {tuple(v) for v in lengths.values()}
    complete = 0
    for cid, conv in joined.groupby("conversation_id"):
        conv = conv.sort_values("arrival_unix_s")
        assert list(conv["turn"]) == list(range(len(conv))), cid
        sent = tuple(int(p) - TAG_TOKENS for p in conv["prompt_tokens_sim"])
        assert any(r[: len(sent)] == sent for r in recorded), (cid, sent)
        assert (conv["cached_tokens_sim"].iloc[1:] >= 16).all(), cid  # one tag: blocks shared
        starts = conv["start_unix_s"].to_numpy()
        for k in range(1, len(conv)):
            want = OFFSETS[k] * SCALE
            assert starts[k] - starts[0] == pytest.approx(want, rel=0.05), (cid, k)
        complete += len(conv) == len(OFFSETS)
    assert complete >= 2
