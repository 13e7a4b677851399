"""Choose prompt words that cost the same number of tokens on the server's own tokenizer.

Why: a synthetic prompt is exact only if every unique tag costs the same number of tokens (the
calibration probe and the real prompts carry different tags) and, for lengths-only log replay,
every filler word too. On a byte-level BPE trained on code, " tree" is 1 token, " red" 2 and
" blue" 3, so the default words made prompts miss their target by up to ±3 tokens.

Algorithm (``choose_vocabulary``), given ``count(text) -> tokens`` from a tokenize endpoint:

1. measure each of the ``CANDIDATE_WORDS`` (128 short common words, English and code) IN CONTEXT:
   ``count("ref W the") - count("ref the")``, i.e. with a leading space, between other words;
2. group the words by cost; for each cost ``c`` whose group has ≥ 2 words, a tag uses
   ``b = min(⌊log2(size)⌋, MAX_WORD_BITS)`` bits per word, so ``⌈MIN_TAG_BITS / b⌉`` words and
   ``c × ⌈MIN_TAG_BITS / b⌉`` tokens; the group with the fewest tag tokens wins (ties: lower cost);
3. filler words are the cost-1 group when it has ≥ ``MIN_FILLER_WORDS`` words (one token per word,
   so any target is reachable), else the default filler stays;
4. ``check_additive``: a few whole tags followed by filler must count exactly the sum of their
   parts; if not, the default vocabulary stays (the caller warns once).

Parameters: ``MIN_TAG_BITS = 24`` (≥ 16.7 M distinct tags per process: more than any run sends),
``MAX_WORD_BITS = 6`` (64 words per digit), ``MIN_FILLER_WORDS = 8``, ``ADDITIVITY_SAMPLES = 4``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from loadknee_locust.prompts.filler import TAG_LEAD, Tagger, Vocabulary, filler

MIN_TAG_BITS = 24
MAX_WORD_BITS = 6
MIN_FILLER_WORDS = 8
ADDITIVITY_SAMPLES = 4
ANCHOR = "the"  # the word after the measured one: costs are taken between words

_CANDIDATES = (
    "the a an and or not is in on at to of for with as by from if it be we you he she they "
    "this that all any can do go get set put run see say use new old one two six ten big "
    "red top end day way man car cat dog sun sea air box cup map key pen bag bed bus law "
    "art age ice oil tea time data name file path line list type test case code text word "
    "node item part page user size mode left right first last next back open read send "
    "call load save find make take give keep show tree self def class return import true "
    "false print value index count range while break pass else out"
)
CANDIDATE_WORDS: tuple[str, ...] = tuple(_CANDIDATES.split(" "))

TokenCounter = Callable[[str], int]


def word_costs(count: TokenCounter, words: Sequence[str] = CANDIDATE_WORDS) -> dict[str, int]:
    """Each word's token cost in context: with a leading space, between two other words."""
    base = count(f"{TAG_LEAD} {ANCHOR}")
    return {w: count(f"{TAG_LEAD} {w} {ANCHOR}") - base for w in words}


def vocabulary_from_costs(costs: Mapping[str, int]) -> Vocabulary | None:
    """The cheapest uniform-cost tag vocabulary (and cost-1 filler), or None if none exists."""
    groups: dict[int, list[str]] = {}
    for word, cost in costs.items():
        if cost >= 1:
            groups.setdefault(cost, []).append(word)
    best: tuple[int, int, int] | None = None  # (tag tokens, cost, bits per word)
    for cost, words in groups.items():
        if len(words) < 2:
            continue
        bits = min(int(math.log2(len(words))), MAX_WORD_BITS)
        tokens = cost * math.ceil(MIN_TAG_BITS / bits)
        if best is None or (tokens, cost) < best[:2]:
            best = (tokens, cost, bits)
    if best is None:
        return None
    _, cost, bits = best
    ones = groups.get(1, [])
    uniform_filler = len(ones) >= MIN_FILLER_WORDS
    default = Vocabulary()
    return Vocabulary(
        tag_words=tuple(groups[cost][: 1 << bits]),
        tag_digits=math.ceil(MIN_TAG_BITS / bits),
        filler_words=tuple(ones) if uniform_filler else default.filler_words,
        kind="tokenizer",
        tag_word_tokens=cost,
        filler_word_tokens=1 if uniform_filler else None,
    )


def check_additive(count: TokenCounter, vocabulary: Vocabulary) -> Vocabulary:
    """Verify on a few tags (+ filler) that whole texts cost the sum of their words; returns the
    vocabulary with ``tag_tokens`` filled in, or raises ``ValueError`` saying what differed."""
    assert vocabulary.tag_word_tokens is not None
    base = count(f"{TAG_LEAD} {ANCHOR}")
    tagger = Tagger(salt=0x5EED, vocabulary=vocabulary)
    fill = filler(2 * len(vocabulary.filler_words) + 3, vocabulary=vocabulary)
    fill_tokens = count(f"{TAG_LEAD} {fill} {ANCHOR}") - base
    per_word = vocabulary.filler_word_tokens
    if per_word is not None and fill_tokens != per_word * len(fill.split()):
        raise ValueError(f"filler costs {fill_tokens} tokens, not {len(fill.split())}")
    expected = vocabulary.tag_word_tokens * vocabulary.tag_digits
    for _ in range(ADDITIVITY_SAMPLES):
        tag = tagger.next_tag()
        got = count(f"{tag} {ANCHOR}") - base
        with_fill = count(f"{tag} {fill} {ANCHOR}") - base
        if got != expected or with_fill != expected + fill_tokens:
            raise ValueError(f"a tag costs {got} tokens (+filler {with_fill}), not {expected}")
    lead = count(f"{TAG_LEAD} {ANCHOR}") - count(ANCHOR)
    return replace(vocabulary, tag_tokens=lead + expected)


def choose_vocabulary(count: TokenCounter) -> Vocabulary:
    """Steps 1-4 above; raises ``ValueError`` when no uniform vocabulary checks out."""
    chosen = vocabulary_from_costs(word_costs(count))
    if chosen is None:
        raise ValueError("no two candidate words cost the same number of tokens")
    return check_additive(count, chosen)
