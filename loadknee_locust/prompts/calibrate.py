"""Calibrate synthetic prompt lengths against the server's own tokenizer (``usage.prompt_tokens``).

Why: a prompt's token count depends on the server's tokenizer and, on chat, on its chat template
(role headers, generation prompt). Rather than guess, we ask: send a few probe prompts of known
filler-word counts with ``max_tokens=1`` and read back ``usage.prompt_tokens``.

Algorithm (``calibrate``):

1. probe ``w = 16`` and ``w = 80`` filler words (same structure as the real prompts: prefix, tag);
2. fit ``tokens = overhead + tokens_per_word × w`` through the two points;
3. for each exact target T (fixed-length mode has one), start at the fitted word count and correct
   by the observed miss until the server reports exactly T (at most ``max_rounds`` probes per
   target); the verified word count is remembered.

Other targets (lengths-only log replay) use the fitted line, which is exact when filler words are
one token each (the simulator, and the usual BPE tokenizers for these words).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

PROBE_WORDS = (16, 80)


@dataclass(frozen=True, slots=True)
class Calibration:
    """Prompt tokens as a function of filler words, as measured (or assumed when not calibrated)."""

    overhead_tokens: float  # tokens beyond the filler words: template, tag, prefix
    tokens_per_word: float
    probes: int = 0
    calibrated: bool = False
    error: str | None = None
    exact: tuple[tuple[int, int], ...] = ()  # (target tokens, verified filler words)

    def words_for(self, target_tokens: int) -> int:
        """Filler words that make a prompt of ``target_tokens`` tokens (≥ 0)."""
        for target, words in self.exact:
            if target == target_tokens:
                return words
        return max(0, round((target_tokens - self.overhead_tokens) / self.tokens_per_word))

    def as_dict(self) -> dict[str, object]:
        return {
            "calibrated": self.calibrated,
            "overhead_tokens": self.overhead_tokens,
            "tokens_per_word": self.tokens_per_word,
            "probes": self.probes,
            "error": self.error,
            "exact": {str(t): w for t, w in self.exact},
        }


def assumed(overhead_tokens: float, error: str | None = None) -> Calibration:
    """The guess used without calibration: one token per filler word."""
    return Calibration(float(overhead_tokens), 1.0, calibrated=False, error=error)


def calibrate(
    measure: Callable[[int], int], targets: Sequence[int] = (), *, max_rounds: int = 4
) -> Calibration:
    """Fit the line with two probes, then hit each target exactly. ``measure(words)`` returns the
    server's ``prompt_tokens`` for a probe prompt with that many filler words (it may raise; the
    caller turns that into an uncalibrated result)."""
    (w1, w2) = PROBE_WORDS
    p1, p2 = measure(w1), measure(w2)
    probes = 2
    slope = (p2 - p1) / (w2 - w1)
    if slope <= 0:
        raise ValueError(f"prompt_tokens did not grow with the prompt ({p1} → {p2})")
    fit = Calibration(p1 - slope * w1, slope, probes, True)
    exact: list[tuple[int, int]] = []
    for target in targets:
        words = fit.words_for(target)
        for _ in range(max_rounds):
            got = measure(words)
            probes += 1
            if got == target:
                exact.append((target, words))
                break
            step = round((target - got) / slope) or (1 if target > got else -1)
            if words + step < 0:
                break
            words += step
    return Calibration(fit.overhead_tokens, slope, probes, True, None, tuple(exact))
