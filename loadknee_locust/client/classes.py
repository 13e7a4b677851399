"""The traffic classes of one process (``--llm-classes``): the next request's class and source.

One :class:`ClassMix` per process (on its :class:`~loadknee_locust.client.state.LLMState`), so
every user of the process draws from one :class:`~loadknee_core.traffic_classes.WeightedCycle`
and the process's requests follow the weights exactly. Each class has a fixed-length source that
shares the run's prompt synthesiser (its calibration and shared prefix), so a class of 1024
tokens is as exact as the run's own length.
"""

from __future__ import annotations

from typing import Any

from loadknee_core.traffic_classes import TrafficClass, WeightedCycle, parse_classes
from loadknee_locust.prompts import FixedLengthSource

_ATTR = "_loadknee_class_mix"


class ClassMix:
    def __init__(self, classes: tuple[TrafficClass, ...], synth: Any) -> None:
        self.cycle = WeightedCycle(classes)
        self.sources = {
            c.name: FixedLengthSource(synth, input_tokens=c.input_tokens,
                                      output_tokens=c.output_tokens)
            for c in classes
        }  # fmt: skip

    def next(self) -> tuple[TrafficClass, FixedLengthSource]:
        chosen = self.cycle.next()
        return chosen, self.sources[chosen.name]


def class_mix(llm: Any) -> ClassMix | None:
    """The process's mix for ``llm`` (an LLMState), None without ``--llm-classes``; rebuilt when
    the prompt source or the option changes (the web UI may edit it between runs)."""
    text = getattr(llm.options, "classes", "")
    source = llm.source
    if not text.strip() or source is None:
        return None
    key = (id(source), text)
    held = getattr(llm, _ATTR, None)
    if held is None or held[0] != key:
        held = (key, ClassMix(parse_classes(text), source.synth))
        setattr(llm, _ATTR, held)
    return held[1]
