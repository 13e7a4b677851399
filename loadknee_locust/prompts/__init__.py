"""Prompt sources chosen by the ``--llm-*`` prompt options: fixed length or log replay.

``build_source(SourceOptions.from_parsed(parsed_options))`` returns a
:class:`~loadknee_locust.prompts.model.PromptSource`. Everything here is plain Python (no locust,
no gevent): calibration talks to the server through a ``measure`` callable the user class passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadknee_locust.prompts.calibrate import Calibration, calibrate
from loadknee_locust.prompts.fixed import FixedLengthSource
from loadknee_locust.prompts.logentry import LogFormat
from loadknee_locust.prompts.model import Endpoint, Prompt, PromptSource
from loadknee_locust.prompts.replay import LogReplaySource
from loadknee_locust.prompts.synth import PromptSynth

__all__ = [
    "Calibration",
    "Endpoint",
    "FixedLengthSource",
    "LogReplaySource",
    "Prompt",
    "PromptSource",
    "PromptSynth",
    "SourceOptions",
    "build_source",
    "calibrate",
]


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """The prompt options, typed (argparse stays at the edge)."""

    input_tokens: int = 128
    output_tokens: int = 64
    prompt_log: str = ""
    log_format: LogFormat = "auto"
    sample_without_replacement: bool = False
    output_scale: float = 1.0
    shared_prefix_tokens: int = 0
    unique_tag: bool = True
    calibrate: bool = True
    seed: int = 0

    @classmethod
    def from_parsed(cls, parsed: Any, *, seed_offset: int = 0) -> SourceOptions:
        """From ``environment.parsed_options`` (None → defaults); ``seed_offset`` per worker."""
        if parsed is None:
            return cls(seed=seed_offset)
        d = cls()
        return cls(
            input_tokens=getattr(parsed, "llm_input_tokens", d.input_tokens),
            output_tokens=getattr(parsed, "llm_output_tokens", d.output_tokens),
            prompt_log=getattr(parsed, "llm_prompt_log", d.prompt_log) or "",
            log_format=getattr(parsed, "llm_log_format", d.log_format),
            sample_without_replacement=getattr(parsed, "llm_sample_without_replacement", False),
            output_scale=getattr(parsed, "llm_output_scale", d.output_scale),
            shared_prefix_tokens=getattr(parsed, "llm_shared_prefix_tokens", 0),
            unique_tag=not getattr(parsed, "llm_no_unique_tag", False),
            calibrate=not getattr(parsed, "llm_no_calibrate", False),
            seed=getattr(parsed, "llm_seed", 0) + seed_offset,
        )


def build_source(options: SourceOptions) -> FixedLengthSource | LogReplaySource:
    """The source the options ask for (raises ``ValueError`` with a clear message)."""
    synth = PromptSynth(prefix_tokens=options.shared_prefix_tokens, unique_tag=options.unique_tag)
    if options.prompt_log:
        return LogReplaySource(
            options.prompt_log,
            synth,
            fmt=options.log_format,
            seed=options.seed,
            replacement=not options.sample_without_replacement,
            output_scale=options.output_scale,
            default_output_tokens=options.output_tokens,
        )
    return FixedLengthSource(
        synth, input_tokens=options.input_tokens, output_tokens=options.output_tokens
    )
