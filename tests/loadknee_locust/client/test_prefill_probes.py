"""The prefill probes' loop (``client.prefill_probes``) with a plain fake ``send``: the lengths
asked and their order, failures skipped, too few answers keep none."""

from __future__ import annotations

import pytest

from loadknee_locust.client.prefill_probes import probe_prefill


def _words_for(tokens: int) -> int:
    """A calibration of 10 overhead tokens and one token per word."""
    return tokens - 10


#: case → (target T, rounds, words whose probe fails (None) or raises, the answered tokens)
CASES = {
    "two rounds, interleaved": (100, 2, {}, [100, 25, 400, 50, 200] * 2),
    "one round": (100, 1, {}, [100, 25, 400, 50, 200]),
    "an odd target rounds its fractions": (129, 1, {}, [129, 32, 516, 64, 258]),
    "4T too long for the server: skipped": (100, 2, {390: None}, [100, 25, 50, 200] * 2),
    "a probe that raises is skipped": (100, 2, {40: "raise"}, [100, 25, 400, 200] * 2),
    "fewer than 3 answers: none kept": (
        100,
        1,
        {15: None, 390: None, 40: None, 190: "raise"},
        [],
    ),
    "every probe fails": (100, 2, {90: None, 15: None, 390: None, 40: None, 190: None}, []),
}


@pytest.mark.parametrize(("target", "rounds", "fails", "answered"), CASES.values(), ids=CASES)
def test_probes_ask_each_length_in_turn_and_skip_failures(
    target: int, rounds: int, fails: dict[int, str | None], answered: list[int]
) -> None:
    asked: list[int] = []

    def send(words: int) -> tuple[int, float] | None:
        asked.append(words)
        if words in fails:
            if fails[words] == "raise":
                raise ValueError("probe got HTTP 500")
            return None
        tokens = words + 10
        return tokens, 5.0 + 0.05 * tokens

    got = probe_prefill(send, _words_for, target, rounds)
    fractions = (1.0, 0.25, 4.0, 0.5, 2.0)
    assert asked == [_words_for(round(target * f)) for f in fractions] * rounds
    assert got == [(t, 5.0 + 0.05 * t) for t in answered]
