"""Prompt sources chosen by the ``--llm-*`` prompt options: fixed length or log replay.

``build_source(SourceOptions.from_options(llm_options))`` returns a
:class:`~loadknee_locust.prompts.model.PromptSource`. Everything here is plain Python (no locust,
no gevent): calibration talks to the server through a ``measure`` callable the user class passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from loadknee_core.logentry import LogFormat
from loadknee_locust.prompts.calibrate import Calibration, calibrate
from loadknee_locust.prompts.fixed import FixedLengthSource
from loadknee_locust.prompts.model import Endpoint, Prompt, PromptSource
from loadknee_locust.prompts.replay import LogReplaySource
from loadknee_locust.prompts.synth import PromptSynth

if TYPE_CHECKING:  # the options live with the Locust wiring, above this package
    from loadknee_locust.plugin.options import LlmOptions

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
    """The prompt options, typed; built from the ``--llm-*`` options (their defaults live there)."""

    input_tokens: int
    output_tokens: int
    prompt_log: str
    log_format: LogFormat
    sample_without_replacement: bool
    output_scale: float
    shared_prefix_tokens: int
    unique_tag: bool
    calibrate: bool
    seed: int

    @classmethod
    def from_options(cls, options: LlmOptions, *, seed_offset: int = 0) -> SourceOptions:
        """The prompt part of ``options``; ``seed_offset`` gives each worker its own sequence."""
        return options.part(
            cls,
            unique_tag=not options.no_unique_tag,
            calibrate=not options.no_calibrate,
            seed=options.seed + seed_offset,
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
