"""Synthesise prompts of a target token length: shared prefix + unique tag + filler words.

Used by the fixed-length source and by lengths-only log replay. The word count for a target comes
from the endpoint's :class:`~loadknee_locust.prompts.calibrate.Calibration` (chat and completions
differ by the chat template, so each endpoint is calibrated on its own); until one is set, the
assumed calibration counts one token per word plus the tag and prefix words.
"""

from __future__ import annotations

from loadknee_locust.prompts.calibrate import Calibration, assumed
from loadknee_locust.prompts.filler import DEFAULT_VOCABULARY, Tagger, Vocabulary, filler
from loadknee_locust.prompts.model import Endpoint, Prompt


class PromptSynth:
    """Builds synthetic prompts; holds one calibration per endpoint."""

    def __init__(
        self, *, prefix_tokens: int = 0, unique_tag: bool = True, tagger: Tagger | None = None
    ) -> None:
        if prefix_tokens < 0:
            raise ValueError("--llm-shared-prefix-tokens must be ≥ 0")
        self.prefix_tokens = prefix_tokens
        self.unique_tag = unique_tag
        self._tagger = tagger or Tagger()
        self._calibrations: dict[str, Calibration] = {}
        self.vocabulary = DEFAULT_VOCABULARY
        self.prefix = filler(prefix_tokens, offset=7)

    def set_vocabulary(self, vocabulary: Vocabulary) -> None:
        """Use words chosen for the server's tokenizer (before any prompt is sent: the shared
        prefix is rebuilt from them, and calibrations made with the old words are dropped)."""
        self.vocabulary = vocabulary
        self._tagger.vocabulary = vocabulary
        self.prefix = filler(self.prefix_tokens, offset=7, vocabulary=vocabulary)
        self._calibrations.clear()

    def default_calibration(self) -> Calibration:
        v = self.vocabulary
        tag = (v.tag_tokens or v.tag_word_count) if self.unique_tag else 0
        return assumed(tag + self.prefix_tokens * (v.filler_word_tokens or 1))

    def calibration(self, endpoint: Endpoint) -> Calibration:
        return self._calibrations.get(endpoint) or self.default_calibration()

    def set_calibration(self, endpoint: Endpoint, calibration: Calibration) -> None:
        self._calibrations[endpoint] = calibration

    def calibrations(self) -> dict[str, dict[str, object]]:
        return {k: v.as_dict() for k, v in sorted(self._calibrations.items())}

    def text(self, words: int) -> str:
        """Tag (unless disabled) followed by ``words`` filler words."""
        body = filler(words, vocabulary=self.vocabulary)
        if not self.unique_tag:
            return body
        tag = self._tagger.next_tag()
        return f"{tag} {body}" if body else tag

    def probe(self, words: int, max_tokens: int = 1) -> Prompt:
        """A calibration probe: the real prompts' structure with ``words`` filler words."""
        text = self.text(words)
        return Prompt(text, None, max_tokens, False, None, None, "", self.prefix)

    def build(
        self, endpoint: Endpoint, input_tokens: int, output_tokens: int, *, pin: bool = True
    ) -> Prompt:
        """A prompt of ``input_tokens`` (per the endpoint's calibration), ``output_tokens`` out.

        The prompt carries ``input_tokens`` as its row's target only where the endpoint was
        calibrated: the assumed calibration (one token a word, ``--no-calibrate`` or a failed
        probe) misses by the chat template's tokens, and an exact row check would then fail
        every request as ``length_mismatch``; the row keeps the length the server counted."""
        calibration = self.calibration(endpoint)
        text = self.text(calibration.words_for(input_tokens))
        target = input_tokens if calibration.calibrated else None
        return Prompt.hashed(self.prefix, text, None, output_tokens, pin=pin, input_tokens=target)
