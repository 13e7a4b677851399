"""The simulator's tokenizer: the documented rule, table-driven."""

from __future__ import annotations

import pytest

from loadknee_locust.sim.tokenizer import VOCAB, count_chat_tokens, count_tokens, tokenize


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", []),
        ("   \n\t", []),
        ("Hello, world!", ["Hello", ",", "world", "!"]),
        (" lorem ipsum", ["lorem", "ipsum"]),
        ("don't", ["don", "'", "t"]),
        ("a_b 42 3.14", ["a_b", "42", "3", ".", "14"]),
        ("naïve café", ["naïve", "café"]),
        ("你好，世界", ["你好", "，", "世界"]),
        ("x+=1;", ["x", "+", "=", "1", ";"]),
    ],
)
def test_tokenize(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens
    assert count_tokens(text) == len(tokens)


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([{"role": "user", "content": "Hi"}], 2 + 3 + 1),
        ([{"role": "system", "content": "a b"}, {"role": "user", "content": "c"}], 2 + 2 * 3 + 3),
        ([{"role": "user", "content": None}], 2 + 3),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "a b"},
                        {"type": "image_url", "image_url": {"url": "x"}},
                        {"type": "text", "text": "c"},
                    ],
                }
            ],
            2 + 3 + 3,
        ),
    ],
)
def test_chat_template_overhead(messages: list[dict], expected: int) -> None:
    assert count_chat_tokens(messages, per_message=3, constant=2) == expected


def test_bad_content_is_an_error() -> None:
    with pytest.raises(ValueError):
        count_chat_tokens([{"role": "user", "content": 5}], per_message=3, constant=3)


def test_generated_tokens_retokenize_exactly() -> None:
    assert all(count_tokens(piece) == 1 and piece.startswith(" ") for piece in VOCAB)
    text = "".join(VOCAB[i % len(VOCAB)] for i in range(500))
    assert count_tokens(text) == 500
