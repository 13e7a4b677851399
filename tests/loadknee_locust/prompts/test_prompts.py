"""Prompt sources: filler and tags, calibration, log records, the log index, sampling, replay."""

from __future__ import annotations

import csv
import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest

from loadknee_core.logentry import LogEntry, entry_from_mapping
from loadknee_core.logindex import MAX_BAD_SAMPLES, index_log, read_entry
from loadknee_locust.client import payloads
from loadknee_locust.plugin.options import LlmOptions
from loadknee_locust.prompts import SourceOptions, build_source
from loadknee_locust.prompts.calibrate import Calibration, calibrate
from loadknee_locust.prompts.filler import TAG_WORD_COUNT, Tagger, filler, tag_for
from loadknee_locust.prompts.replay import LogReplaySource, Sampler
from loadknee_locust.prompts.synth import PromptSynth
from loadknee_locust.sim.tokenizer import count_chat_tokens, count_tokens
from tests.support.synth import calibrated_synth

# -- filler and tags -----------------------------------------------------------------------


def source_options(**options: object) -> SourceOptions:
    """The prompt options of these ``--llm-*`` values (the rest at their defaults)."""
    return SourceOptions.from_options(LlmOptions(**options))  # type: ignore[arg-type]


@pytest.mark.parametrize("words", [0, 1, 5, 21, 22, 500])
def test_filler_has_exactly_the_words_asked(words: int) -> None:
    text = filler(words)
    assert len(text.split()) == words
    assert count_tokens(text) == words  # one token per word on the simulator


def test_tags_are_distinct_and_all_the_same_length() -> None:
    tagger = Tagger(salt=12345)
    tags = [tagger.next_tag() for _ in range(20_000)]
    assert len(set(tags)) == len(tags)
    assert {len(t.split()) for t in tags} == {TAG_WORD_COUNT}
    assert tag_for(0) != tag_for(1) and tag_for(5) == tag_for(5 + 2**30)


# -- calibration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overhead", "per_word", "target"),
    [(13, 1.0, 128), (7, 1.0, 2000), (0, 1.0, 1), (40, 1.3, 512), (5, 2.0, 301)],
)
def test_calibration_hits_the_target_when_reachable(
    overhead: int, per_word: float, target: int
) -> None:
    calls: list[int] = []

    def measure(words: int) -> int:
        calls.append(words)
        return overhead + int(words * per_word)

    cal = calibrate(measure, [target])
    words = cal.words_for(target)
    reachable = any(overhead + int(w * per_word) == target for w in range(target + 2))
    assert (measure(words) == target) == reachable
    assert cal.calibrated and cal.probes == len(calls) - 1 <= 6


def test_calibration_refuses_a_server_whose_count_does_not_grow() -> None:
    with pytest.raises(ValueError, match="did not grow"):
        calibrate(lambda words: 42, [100])


def test_uncalibrated_guess_and_exact_override() -> None:
    cal = Calibration(10.0, 1.0, exact=((100, 93),))
    assert cal.words_for(100) == 93
    assert cal.words_for(50) == 40
    assert cal.words_for(3) == 0  # never negative


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_only_a_calibrated_endpoint_gives_its_rows_an_input_target(endpoint: str) -> None:
    # the assumed counts (--no-calibrate, a failed probe) miss by the chat template's tokens:
    # with the target kept, every row of such a run read length_mismatch
    synth = PromptSynth()
    guessed = synth.build(endpoint, 64, 8)
    assert (guessed.target_input_tokens, guessed.target_output_tokens) == (None, 8)
    template = synth.default_calibration().overhead_tokens + 9  # what the guess leaves out
    synth.set_calibration(endpoint, calibrate(lambda words: round(words + template), [64]))
    measured = synth.build(endpoint, 64, 8)
    assert (measured.target_input_tokens, measured.target_output_tokens) == (64, 8)
    assert measured.text and guessed.text
    assert len(guessed.text.split()) - len(measured.text.split()) == 9  # the measured words


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize(("prefix", "tag"), [(0, True), (0, False), (32, True)])
@pytest.mark.parametrize("target", [64, 128, 1000])
def test_calibration_is_exact_on_the_simulator_tokenizer(
    endpoint: str, prefix: int, tag: bool, target: int
) -> None:
    """Counting exactly as the simulator does (template overhead included), no HTTP."""
    synth = PromptSynth(prefix_tokens=prefix, unique_tag=tag)
    options = payloads.BodyOptions(model="m")

    def tokens_of(prompt) -> int:
        if endpoint == "chat":
            return count_chat_tokens(payloads.chat_messages(prompt), per_message=3, constant=3)
        return count_tokens(payloads.completion_text(prompt))

    def measure(words: int) -> int:
        return tokens_of(synth.probe(words))

    synth.set_calibration(endpoint, calibrate(measure, [target]))
    for _ in range(3):
        prompt = synth.build(endpoint, target, 16)
        assert tokens_of(prompt) == target
        body = (
            payloads.chat_body(options, prompt)
            if endpoint == "chat"
            else payloads.completions_body(options, [prompt])
        )
        assert body["max_tokens"] == body["min_tokens"] == 16 and body["ignore_eos"] is True


def test_fixed_source_rejects_a_prefix_longer_than_the_prompt() -> None:
    with pytest.raises(ValueError, match="smaller than"):
        build_source(source_options(input_tokens=64, shared_prefix_tokens=64))


def test_shared_prefix_is_the_same_for_every_prompt_and_tags_differ() -> None:
    source = build_source(source_options(input_tokens=200, shared_prefix_tokens=50))
    prompts = [source.next_prompt("chat") for _ in range(5)]
    assert len({p.prefix for p in prompts}) == 1 and count_tokens(prompts[0].prefix) == 50
    assert len({p.text for p in prompts}) == 5
    messages = payloads.chat_messages(prompts[0])
    assert messages[0] == {"role": "system", "content": prompts[0].prefix}


# -- log records ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "fmt", "expected"),
    [
        (
            {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20},
            "auto",
            LogEntry("messages", messages=({"role": "user", "content": "hi"},), max_tokens=20),
        ),
        (
            {"body": {"prompt": "hi", "max_completion_tokens": 7}},
            "openai",
            LogEntry("text", text="hi", max_tokens=7),
        ),
        ({"prompt": ["only one"]}, "auto", LogEntry("text", text="only one")),
        (
            {"text": "hi", "output_tokens": "12"},
            "text",
            LogEntry("text", text="hi", output_tokens=12),
        ),
        (
            {"input_tokens": 100, "output_tokens": 30},
            "lengths",
            LogEntry("lengths", input_tokens=100, output_tokens=30),
        ),
        (
            {"input_tokens": "100", "max_tokens": "30.0"},
            "auto",
            LogEntry("lengths", input_tokens=100, output_tokens=30),
        ),
    ],
)
def test_log_records_accepted(record: dict, fmt: str, expected: LogEntry) -> None:
    assert entry_from_mapping(record, fmt) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("record", "fmt", "reason"),
    [
        ([1, 2], "auto", "not a JSON object"),
        ({"messages": []}, "auto", "non-empty list"),
        ({"messages": ["hi"]}, "auto", "with a role"),
        ({"prompt": ""}, "auto", "non-empty string"),
        ({"prompt": "x", "max_tokens": -1}, "auto", "max_tokens"),
        ({"prompt": "x", "max_tokens": 1.5}, "auto", "max_tokens"),
        ({"prompt": "x", "max_tokens": True}, "auto", "max_tokens"),
        ({"input_tokens": 0, "output_tokens": 5}, "auto", "input_tokens"),
        ({"input_tokens": 10}, "auto", "output_tokens is missing"),
        ({"foo": 1}, "auto", "no messages"),
        ({"prompt": "x"}, "lengths", "--llm-log-format lengths"),
        ({"input_tokens": 10, "output_tokens": 5}, "openai", "--llm-log-format openai"),
    ],
)
def test_log_records_rejected_with_a_reason(record: object, fmt: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        entry_from_mapping(record, fmt)  # type: ignore[arg-type]


# -- the index -----------------------------------------------------------------------------


def _write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_jsonl_index_counts_bad_lines_with_numbers_and_hashes_the_file(tmp_path: Path) -> None:
    log = _write_jsonl(
        tmp_path / "log.jsonl",
        [
            json.dumps({"prompt": "secret text one", "max_tokens": 5}),
            "{not json",
            "",
            json.dumps({"messages": [{"role": "user", "content": "secret two"}]}),
            json.dumps({"input_tokens": 10, "output_tokens": 3}),
            json.dumps({"nothing": True}),
        ],
    )
    index = index_log(log)
    assert (index.records, index.valid, index.bad_count) == (5, 3, 2)
    # words are the product: the reason a user reads for each unreadable prompt line
    assert index.bad_samples == [
        (2, "not valid JSON"),
        (6, "no messages, prompt, text or input_tokens"),
    ]
    assert index.sha256 == hashlib.sha256(log.read_bytes()).hexdigest()
    assert "secret" not in index.summary()
    with open(log, "rb") as f:
        assert [read_entry(f, index, i).kind for i in range(3)] == ["text", "messages", "lengths"]


def test_csv_index_handles_quoted_newlines_and_bad_rows(tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    with open(log, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["prompt", "max_tokens"])
        w.writerow(["line one\nline two", "8"])
        w.writerow(["plain", "x"])  # bad max_tokens
        w.writerow(["third", ""])
        w.writerow(["too", "many", "fields"])
    index = index_log(log)
    assert (index.valid, index.bad_count) == (2, 2)
    assert [n for n, _ in index.bad_samples] == [4, 6]  # line numbers count the quoted newline
    with open(log, "rb") as f:
        first, second = read_entry(f, index, 0), read_entry(f, index, 1)
    assert first == LogEntry("text", text="line one\nline two", max_tokens=8)
    assert second == LogEntry("text", text="third")


def test_a_log_with_nothing_valid_is_a_clear_error(tmp_path: Path) -> None:
    log = _write_jsonl(tmp_path / "bad.jsonl", ["{", "[]", '{"x": 1}'])
    with pytest.raises(ValueError, match=r"no valid record.*3 malformed"):
        index_log(log)
    with pytest.raises(ValueError, match="no valid record"):
        index_log(_write_jsonl(tmp_path / "empty.jsonl", []))


def test_bad_line_samples_are_bounded(tmp_path: Path) -> None:
    log = _write_jsonl(tmp_path / "log.jsonl", ["{"] * 100 + ['{"prompt": "ok"}'])
    index = index_log(log)
    assert index.bad_count == 100 and len(index.bad_samples) == MAX_BAD_SAMPLES


# -- sampling and replay -------------------------------------------------------------------


def test_sampler_is_seeded_and_without_replacement_covers_each_record_once() -> None:
    a = [Sampler(50, seed=3, replacement=True).next_index() for _ in range(1)]
    s1, s2 = Sampler(50, seed=3, replacement=True), Sampler(50, seed=3, replacement=True)
    assert [s1.next_index() for _ in range(200)] == [s2.next_index() for _ in range(200)] and a
    wo = Sampler(50, seed=3, replacement=False)
    first, second = [wo.next_index() for _ in range(50)], [wo.next_index() for _ in range(50)]
    assert sorted(first) == sorted(second) == list(range(50))
    assert first != second and wo.epochs == 2


def test_replay_pins_observed_lengths_caps_max_tokens_and_scales(tmp_path: Path) -> None:
    log = _write_jsonl(
        tmp_path / "log.jsonl",
        [
            json.dumps({"prompt": "p1", "max_tokens": 10}),
            json.dumps({"text": "p2", "output_tokens": 10}),
            json.dumps({"prompt": "p3"}),
            json.dumps({"input_tokens": 40, "output_tokens": 10}),
            json.dumps(
                {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}
            ),
        ],
    )
    src = LogReplaySource(
        log, calibrated_synth(), output_scale=1.5, default_output_tokens=20, replacement=False
    )
    by_text = {}
    for _ in range(5):
        p = src.next_prompt("chat")
        key = (p.text or json.dumps(p.messages)).split("\n")[-1]
        by_text[key] = p
    assert (by_text["p1"].max_tokens, by_text["p1"].pin_output) == (15, False)
    assert (
        by_text["p2"].max_tokens,
        by_text["p2"].pin_output,
        by_text["p2"].target_output_tokens,
    ) == (15, True, 15)
    assert (by_text["p3"].max_tokens, by_text["p3"].pin_output) == (30, False)
    lengths = [p for p in by_text.values() if p.target_input_tokens == 40]
    assert len(lengths) == 1 and lengths[0].max_tokens == 15 and lengths[0].pin_output
    messages = next(p.messages for p in by_text.values() if p.messages)
    assert messages[0]["content"].startswith("ref ") and messages[0]["content"].endswith("\ns")
    info = src.info()
    assert info["valid_records"] == 5 and info["epochs"] == 1
    assert "p1" not in json.dumps(info)  # no prompt text in what reaches run.json
    src.close()


def test_replay_without_tag_sends_the_text_as_logged(tmp_path: Path) -> None:
    log = _write_jsonl(tmp_path / "log.jsonl", [json.dumps({"prompt": "exactly this"})])
    src = build_source(source_options(prompt_log=str(log), no_unique_tag=True))
    p = src.next_prompt("completions")
    assert payloads.completion_text(p) == "exactly this"
    assert Counter(src.next_prompt("chat").prompt_hash for _ in range(3)) == {p.prompt_hash: 3}
