"""A prompt synthesiser whose endpoints count as calibrated.

Only a calibrated endpoint's prompts carry their input length as the row's target
(:meth:`loadknee_locust.prompts.synth.PromptSynth.build`); tests of how a target travels build
their prompts through this, with the assumed one-token-a-word counts marked as measured.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from loadknee_locust.prompts.synth import PromptSynth


def calibrated_synth(**kwargs: Any) -> PromptSynth:
    synth = PromptSynth(**kwargs)
    measured = dataclasses.replace(synth.default_calibration(), calibrated=True)
    for endpoint in ("chat", "completions"):
        synth.set_calibration(endpoint, measured)
    return synth
