"""The fixed-length prompt source: every prompt has the same calibrated input and output length."""

from __future__ import annotations

from typing import Any

from loadknee_locust.prompts.model import Endpoint, Prompt
from loadknee_locust.prompts.synth import PromptSynth


class FixedLengthSource:
    """``input_tokens`` in (exact once calibrated), ``output_tokens`` out (pinned)."""

    kind = "fixed"

    def __init__(self, synth: PromptSynth, *, input_tokens: int, output_tokens: int) -> None:
        if input_tokens < 1 or output_tokens < 1:
            raise ValueError("--llm-input-tokens and --llm-output-tokens must be ≥ 1")
        if synth.prefix_tokens and synth.prefix_tokens >= input_tokens:
            raise ValueError(
                f"--llm-shared-prefix-tokens ({synth.prefix_tokens}) must be smaller than "
                f"--llm-input-tokens ({input_tokens}): the prefix is part of the prompt"
            )
        self.synth = synth
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.calibration_targets: tuple[int, ...] = (input_tokens,)

    def next_prompt(self, endpoint: Endpoint) -> Prompt:
        return self.synth.build(endpoint, self.input_tokens, self.output_tokens)

    def info(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target_input_tokens": self.input_tokens,
            "target_output_tokens": self.output_tokens,
            "shared_prefix_tokens": self.synth.prefix_tokens,
            "unique_tag": self.synth.unique_tag,
            "calibration": self.synth.calibrations(),
            "vocabulary": self.synth.vocabulary.as_dict(),
        }
