"""Neutral filler text and short unique tags whose token counts are predictable.

Both are built from short, common English words written with a leading space. The default
:class:`Vocabulary` uses words that are one token each in the usual open models' tokenizers and in
the simulator's; when the server offers a tokenize endpoint, ``prompts.vocab`` picks words that
cost the same number of tokens on THAT tokenizer (a byte-level BPE trained on code splits " red"
in two). So a prompt of ``w`` filler words costs ``w`` tokens (times a constant) plus a constant,
and calibration (``prompts.calibrate``) only has to find that constant. The unique tag is a fixed
lead word plus ``tag_digits`` words drawn from a power-of-two word list (the default: six of 32,
2^30 distinct tags), so every tag has the same token count while no two prompts share a cacheable
prefix.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The words prompts are made of: tag words (a power-of-two count), tag length, filler.

    ``kind`` says where it came from: ``"default"`` (no tokenizer consulted) or ``"tokenizer"``
    (chosen with the server's tokenize endpoint; then ``tag_word_tokens`` /
    ``filler_word_tokens`` are the measured in-context costs and ``tag_tokens`` the whole tag's).
    """

    tag_words: tuple[str, ...] = TAG_WORDS
    tag_digits: int = TAG_DIGITS
    filler_words: tuple[str, ...] = FILLER_WORDS
    kind: str = "default"
    tag_word_tokens: int | None = None
    filler_word_tokens: int | None = None
    tag_tokens: int | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        n = len(self.tag_words)
        if n < 2 or n & (n - 1) or self.tag_digits < 1 or not self.filler_words:
            raise ValueError("tag words must be a power of two (≥ 2), with ≥ 1 digit and filler")

    @property
    def tag_bits(self) -> int:
        return (len(self.tag_words).bit_length() - 1) * self.tag_digits

    @property
    def tag_word_count(self) -> int:
        """Words in a tag, the lead word included."""
        return 1 + self.tag_digits

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "tag_words": len(self.tag_words),
            "tag_digits": self.tag_digits,
            "tag_bits": self.tag_bits,
            "tag_word_tokens": self.tag_word_tokens,
            "tag_tokens": self.tag_tokens,
            "filler_words": len(self.filler_words),
            "filler_word_tokens": self.filler_word_tokens,
            "note": self.note,
        }


DEFAULT_VOCABULARY = Vocabulary()


def filler(words: int, *, offset: int = 0, vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> str:
    """``words`` filler words separated by single spaces (empty for ``words <= 0``)."""
    if words <= 0:
        return ""
    pool = vocabulary.filler_words
    n = len(pool)
    cycle = itertools.islice(itertools.cycle(pool), offset % n, offset % n + words)
    return " ".join(cycle)


def tag_for(number: int, vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> str:
    """The tag of ``number`` (taken modulo 2^tag_bits): ``ref`` + ``tag_digits`` words."""
    words = vocabulary.tag_words
    mask = len(words) - 1
    shift = mask.bit_length()
    digits = []
    for _ in range(vocabulary.tag_digits):
        digits.append(words[number & mask])
        number >>= shift
    return " ".join((TAG_LEAD, *digits))


class Tagger:
    """Hands out distinct tags: a random per-process salt plus a counter (no two equal in
    2^tag_bits). The vocabulary may be swapped once the server's tokenizer has been consulted."""

    def __init__(
        self, salt: int | None = None, vocabulary: Vocabulary = DEFAULT_VOCABULARY
    ) -> None:
        self._salt = int.from_bytes(os.urandom(4), "big") if salt is None else salt
        self._counter = itertools.count()
        self.vocabulary = vocabulary

    def next_tag(self) -> str:
        # odd multiplier: a bijection on tag_bits-bit numbers: successive tags differ a lot
        mask = (1 << self.vocabulary.tag_bits) - 1
        return tag_for((self._salt + next(self._counter) * 0x2545F491) & mask, self.vocabulary)
