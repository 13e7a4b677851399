"""Neutral filler text and short unique tags whose token counts are predictable.

Both are built from short, common English words written with a leading space, which are one
token each in the BPE / SentencePiece tokenizers of the usual open models and in the simulator's
tokenizer; so a prompt of ``w`` filler words costs ``w`` tokens plus a constant, and calibration
(``prompts.calibrate``) only has to find that constant. The unique tag is a fixed word plus six
words drawn from a 32-word list (2^30 distinct tags), so every tag has the same token count while
no two prompts share a cacheable prefix.
"""

from __future__ import annotations

import itertools
import os

_FILLER = "the sun was warm and the sky was blue so we went out for a long walk on the old road"
FILLER_WORDS: tuple[str, ...] = tuple(_FILLER.split(" "))

_TAGS = (
    "red blue green black white brown pink gold cat dog cow pig fox owl bee ant "
    "sun moon star sky sea lake hill tree rock sand snow rain wind fire ice gas"
)
TAG_WORDS: tuple[str, ...] = tuple(_TAGS.split(" "))
TAG_LEAD = "ref"
TAG_DIGITS = 6
TAG_WORD_COUNT = 1 + TAG_DIGITS


def filler(words: int, *, offset: int = 0) -> str:
    """``words`` filler words separated by single spaces (empty for ``words <= 0``)."""
    if words <= 0:
        return ""
    n = len(FILLER_WORDS)
    cycle = itertools.islice(itertools.cycle(FILLER_WORDS), offset % n, offset % n + words)
    return " ".join(cycle)


def tag_for(number: int) -> str:
    """The tag of ``number`` (taken modulo 2^30): ``ref`` + six words."""
    digits = []
    for _ in range(TAG_DIGITS):
        digits.append(TAG_WORDS[number & 31])
        number >>= 5
    return " ".join((TAG_LEAD, *digits))


class Tagger:
    """Hands out distinct tags: a random per-process salt plus a counter (no two equal in 2^30)."""

    def __init__(self, salt: int | None = None) -> None:
        self._salt = int.from_bytes(os.urandom(4), "big") if salt is None else salt
        self._counter = itertools.count()

    def next_tag(self) -> str:
        # odd multiplier: a bijection on 30-bit numbers, so successive tags differ in many words
        return tag_for((self._salt + next(self._counter) * 0x2545F491) & (2**30 - 1))
