"""Conversations (pure): think-time forms, the history each turn resends, turns by index."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from analysis.stages.conversations import by_turn, conversation_counts, planned_turns
from loadknee_locust.prompts import FixedLengthSource
from loadknee_locust.prompts.conversation import Conversation, ThinkTime
from loadknee_locust.prompts.filler import Tagger
from loadknee_locust.sim.tokenizer import count_chat_tokens
from tests.support.synth import calibrated_synth


@pytest.mark.parametrize(
    ("text", "kind", "mean"),
    [("0", "fixed", 0.0), ("2.5", "fixed", 2.5), ("exp:2", "exp", 2.0),
     ("uniform:1,3", "uniform", 2.0)],
)  # fmt: skip
def test_think_time_forms(text: str, kind: str, mean: float) -> None:
    think = ThinkTime.parse(text)
    assert (think.kind, think.mean_s) == (kind, mean)
    rng = random.Random(1)
    draws = [think.draw(rng) for _ in range(4000)]
    assert sum(draws) / len(draws) == pytest.approx(mean, rel=0.05, abs=1e-9)


@pytest.mark.parametrize("text", ["-1", "exp:-2", "uniform:3,1", "soon", "uniform:1"])
def test_think_time_refuses_bad_forms(text: str) -> None:
    with pytest.raises(ValueError, match="--llm-think-time"):
        ThinkTime.parse(text)


def _messages(prompt) -> list[dict]:
    system = [{"role": "system", "content": prompt.prefix}] if prompt.prefix else []
    body = prompt.messages or [{"role": "user", "content": prompt.text}]
    return [*system, *body]


def test_each_turn_resends_the_history_and_grows_by_the_answer() -> None:
    synth = calibrated_synth(prefix_tokens=20, tagger=Tagger(salt=1))
    source = FixedLengthSource(synth, input_tokens=60, output_tokens=8)
    conv = Conversation(source, "chat", conversation_id="c1")
    first = conv.next_prompt()
    assert first.target_input_tokens == 60 and first.messages is None
    conv.answered(8)
    second = conv.next_prompt()
    assert second.target_input_tokens is None and second.target_output_tokens == 8
    assert second.messages is not None and [m["role"] for m in second.messages] == [
        "user", "assistant", "user"
    ]  # fmt: skip
    assert second.messages[0]["content"] == first.text  # the first turn's text, resent
    count = lambda p: count_chat_tokens(_messages(p), per_message=3, constant=3)  # noqa: E731
    assert count(second) == count(first) + 3 + 8 + (count(first) - (3 + 20) - 3)
    assert second.prefix == first.prefix and second.prompt_hash != first.prompt_hash
    assert conv.turn == 1


def test_by_turn_and_counts() -> None:
    rows = pd.DataFrame({
        "conversation_id": ["a", "a", "a", "b", "b", ""],
        "turn": [0, 1, 2, 0, 1, None],
        "outcome": ["ok", "ok", "ok", "ok", "cancelled", "ok"],
        "phase": ["measure"] * 6,
        "prompt_tokens": [100, 200, 300, 100, 200, 50],
        "ttft_ms": [10.0, 20.0, 30.0, 12.0, None, 5.0],
        "e2e_ms": [50.0, 60.0, 70.0, 52.0, 1.0, 9.0],
    })  # fmt: skip
    table = by_turn(rows).set_index("turn")
    assert list(table["requests"]) == [2, 1, 1]
    assert table.at[1, "prompt_tokens_mean"] == 200 and table.at[0, "ttft_p50_ms"] == 11.0
    assert conversation_counts(rows, 3) == {"conversations": 2, "completed": 1, "cut": 1}
    assert planned_turns({"parameters": {"llm_turns": 3}}) == 3 and planned_turns({}) is None
