"""Tag and filler words chosen with the server's tokenizer: table-driven, with fake tokenizers.

A fake tokenizer is a cost per word (``count`` = the sum over the space-separated words, plus a
BOS token that callers must cancel). The code-trained BPE seen on llama-server (" red" 2 tokens,
" blue" 3) is the motivating case: with the default words its prompts miss the target.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from types import SimpleNamespace

import pytest

from loadknee_locust.client.tokenize_probe import server_vocabulary
from loadknee_locust.prompts.calibrate import calibrate
from loadknee_locust.prompts.filler import DEFAULT_VOCABULARY, Tagger, tag_for
from loadknee_locust.prompts.synth import PromptSynth
from loadknee_locust.prompts.vocab import (
    CANDIDATE_WORDS,
    MIN_TAG_BITS,
    check_additive,
    choose_vocabulary,
    vocabulary_from_costs,
    word_costs,
)

Counter = Callable[[str], int]


def fake_tokenizer(costs: Mapping[str, int], default: int = 1) -> Counter:
    def count(text: str) -> int:
        return 1 + sum(costs.get(w, default) for w in text.split())  # 1 = BOS

    return count


CODE_BPE = {"red": 2, "blue": 3, "sun": 2, "sky": 3, "cat": 2, "warm": 2, "walk": 2, "ref": 1}
FEW_ONES = {w: (1 if i < 5 else 2) for i, w in enumerate(CANDIDATE_WORDS)}
TWENTY_ONES = {w: (1 if i < 20 else 2) for i, w in enumerate(CANDIDATE_WORDS)}
ALL_DIFFERENT = {w: i + 1 for i, w in enumerate(CANDIDATE_WORDS)}


@pytest.mark.parametrize(
    ("costs", "tag_words", "tag_digits", "word_tokens", "filler_tokens"),
    [
        ({}, 64, 4, 1, 1),  # everything 1 token: 6 bits a word
        (CODE_BPE, 64, 4, 1, 1),  # a few dear words are simply avoided
        (TWENTY_ONES, 16, 6, 1, 1),  # 6 one-token words beat 4 two-token words
        (FEW_ONES, 64, 4, 2, None),  # 4 two-token words beat 12 one-token; filler stays default
    ],
)
def test_the_cheapest_uniform_tag_is_chosen(
    costs: dict[str, int],
    tag_words: int,
    tag_digits: int,
    word_tokens: int,
    filler_tokens: int | None,
) -> None:
    count = fake_tokenizer(costs)
    v = choose_vocabulary(count)
    assert (len(v.tag_words), v.tag_digits, v.tag_word_tokens) == (
        tag_words,
        tag_digits,
        word_tokens,
    )
    assert v.filler_word_tokens == filler_tokens
    assert v.tag_bits >= MIN_TAG_BITS and v.kind == "tokenizer"
    assert {costs.get(w, 1) for w in v.tag_words} == {word_tokens}
    if filler_tokens is None:
        assert v.filler_words == DEFAULT_VOCABULARY.filler_words
    else:
        assert {costs.get(w, 1) for w in v.filler_words} == {1}
    assert v.tag_tokens == costs.get("ref", 1) + tag_digits * word_tokens


def test_no_two_words_of_equal_cost_means_no_vocabulary() -> None:
    assert vocabulary_from_costs(word_costs(fake_tokenizer(ALL_DIFFERENT))) is None
    with pytest.raises(ValueError, match="same number of tokens"):
        choose_vocabulary(fake_tokenizer(ALL_DIFFERENT))


def test_a_tokenizer_that_merges_words_across_spaces_fails_the_additivity_check() -> None:
    base = fake_tokenizer({})

    def merging(text: str) -> int:  # "the" + "a" become one token when adjacent
        return base(text) - text.count(" the a ")

    with pytest.raises(ValueError, match="costs"):
        choose_vocabulary(merging)
    v = vocabulary_from_costs(word_costs(base))
    assert v is not None
    assert check_additive(base, v).tag_tokens == 1 + v.tag_digits


def test_tags_from_a_chosen_vocabulary_are_distinct_and_cost_the_same() -> None:
    count = fake_tokenizer(CODE_BPE)
    v = choose_vocabulary(count)
    tagger = Tagger(salt=7, vocabulary=v)
    tags = [tagger.next_tag() for _ in range(5000)]
    assert len(set(tags)) == len(tags)
    assert {count(t) for t in tags} == {1 + v.tag_tokens}  # type: ignore[operator]
    assert tag_for(3, v) == tag_for(3 + 2**v.tag_bits, v) != tag_for(4, v)


@pytest.mark.parametrize("target", [40, 64, 200])
@pytest.mark.parametrize("prefix_tokens", [0, 16])
def test_prompts_are_exact_on_a_code_bpe_only_with_the_chosen_words(
    target: int, prefix_tokens: int
) -> None:
    count = fake_tokenizer(CODE_BPE)

    def lengths(synth: PromptSynth) -> set[int]:
        def measure(words: int) -> int:
            p = synth.probe(words)
            return count(f"{p.prefix} {p.text}")

        synth.set_calibration("completions", calibrate(measure, [target]))
        built = [synth.build("completions", target, 8) for _ in range(200)]
        return {count(f"{p.prefix} {p.text}") for p in built}

    default = PromptSynth(prefix_tokens=prefix_tokens, tagger=Tagger(salt=1))
    assert len(lengths(default)) > 1  # the bug: tags of " red"/" blue" words vary in cost
    chosen = PromptSynth(prefix_tokens=prefix_tokens, tagger=Tagger(salt=1))
    chosen.set_vocabulary(choose_vocabulary(count))
    assert lengths(chosen) == {target}
    assert len(chosen.prefix.split()) == prefix_tokens


class FakeSession:
    """``post(path, data=..., headers=...)`` answered by ``answer(body) -> (status, json)``."""

    def __init__(self, answer: Callable[[dict], tuple[int, object]]) -> None:
        self.answer = answer
        self.posts = 0

    def post(self, path: str, data: bytes, headers: dict[str, str]) -> object:
        assert path == "/tokenize" and headers["Content-Type"] == "application/json"
        self.posts += 1
        status, obj = self.answer(json.loads(data))
        return SimpleNamespace(status_code=status, content=json.dumps(obj).encode())


def _llamacpp(body: dict) -> tuple[int, object]:
    if "content" not in body:
        return 400, {"error": "content missing"}
    return 200, {"tokens": list(range(fake_tokenizer(CODE_BPE)(body["content"])))}


def _vllm(body: dict) -> tuple[int, object]:
    if "prompt" not in body or body.get("model") != "m":
        return 400, {"error": "prompt and model required"}
    n = fake_tokenizer(CODE_BPE)(body["prompt"])
    return 200, {"count": n, "tokens": list(range(n)), "max_model_len": 4096}


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (_llamacpp, "tokenizer"),
        (_vllm, "tokenizer"),
        (lambda body: (404, {"detail": "Not Found"}), None),  # the simulator
        (lambda body: (200, {"ok": True}), None),  # answers, but without tokens
    ],
)
def test_server_vocabulary_speaks_both_tokenize_dialects(
    answer: Callable[[dict], tuple[int, object]], kind: str | None
) -> None:
    session = FakeSession(answer)
    v = server_vocabulary(session, "m", {})
    assert (v.kind if v else None) == kind
    if v is not None:
        assert {CODE_BPE.get(w, 1) for w in v.tag_words} == {1}
        assert session.posts < len(CANDIDATE_WORDS) + 25  # bounded probing


def test_a_failed_check_keeps_the_default_words_and_says_why() -> None:
    def merging(body: dict) -> tuple[int, object]:
        text = body.get("content", "")
        return 200, {"tokens": [0] * (fake_tokenizer({})(text) - text.count(" the a "))}

    v = server_vocabulary(FakeSession(merging), "m", {})
    assert v is not None and v.kind == "default" and "costs" in (v.note or "")
    assert v.tag_words == DEFAULT_VOCABULARY.tag_words
