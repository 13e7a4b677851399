"""Traffic classes: several kinds of request in one run, each with a weight, lengths and SLOs.

``--llm-classes`` (stdlib only, so the analysis reads the same spec from run.json) takes one
class per word, ``NAME:WEIGHT:INPUT:OUTPUT[:SLO[+SLO...]]``, e.g.::

    --llm-classes "chat:70:256:64:ttft_p95_ms=500 summarise:30:1024:256:e2e_p95_ms=20000"

or ``@FILE``: a file holding the same words, one class per line (``#`` starts a comment). The
SLOs are ``--slo``'s percentile forms (:mod:`loadknee_core.slo_targets`), judged on that class's
rows alone.

Each request picks its class from a smooth weighted round robin (:class:`WeightedCycle`, as
nginx balances weighted upstreams): deterministic, so the classes' shares of the requests one
process sends match the weights within one request at every point of the run, at any
concurrency (Locust's weighted user classes share out *users*, and a class of long requests then
sends fewer of them). A request's class is the ``traffic_class`` column of ``requests.csv``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

_NAME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,31}$")
_FORM: Final = "NAME:WEIGHT:INPUT:OUTPUT[:SLO[+SLO]], e.g. chat:70:256:64:ttft_p95_ms=500"


@dataclass(frozen=True, slots=True)
class TrafficClass:
    name: str
    weight: float
    input_tokens: int
    output_tokens: int
    slos: tuple[str, ...] = ()  # percentile SLO texts, e.g. ("ttft_p95_ms=500",)

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "slos": list(self.slos)}  # a list: JSON's and YAML's shape


def _one(word: str) -> TrafficClass:
    parts = word.split(":")
    if not 4 <= len(parts) <= 5:
        raise ValueError(f"--llm-classes: {word!r} is not {_FORM}")
    name, weight, inp, out = parts[:4]
    if not _NAME.match(name):
        raise ValueError(f"--llm-classes: class name {name!r} must be a letter then letters, "
                         "digits, '_', '.' or '-' (at most 32)")  # fmt: skip
    try:
        w, i, o = float(weight), int(inp), int(out)
    except ValueError:
        raise ValueError(f"--llm-classes: {word!r} is not {_FORM}") from None
    if not w > 0 or i < 1 or o < 1:
        raise ValueError(f"--llm-classes: {word!r}: weight must be > 0, lengths ≥ 1")
    slos = tuple(s for s in parts[4].split("+") if s) if len(parts) == 5 else ()
    return TrafficClass(name, w, i, o, slos)


def parse_classes(text: str) -> tuple[TrafficClass, ...]:
    """The classes of ``--llm-classes`` (``""``: none); ValueError names what is wrong."""
    raw = text.strip()
    if raw.startswith("@"):
        try:
            raw = Path(raw[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"--llm-classes: cannot read {raw[1:]}: {exc.strerror}") from None
        raw = "\n".join(line.split("#", 1)[0] for line in raw.splitlines())
    classes = tuple(_one(word) for word in raw.split())
    names = [c.name for c in classes]
    if len(set(names)) < len(names):
        raise ValueError("--llm-classes: two classes have the same name")
    if len(classes) == 1:
        raise ValueError("--llm-classes: give two or more classes (one class is the plain run)")
    return classes


def slo_problems(classes: tuple[TrafficClass, ...]) -> list[str]:
    """Each class SLO that is not a percentile SLO (checked with the analysis's own parser)."""
    from loadknee_core.slo_targets import parse_slo  # stdlib only: the one parser of the SLO forms

    problems = []
    for c in classes:
        for text in c.slos:
            try:
                parse_slo(text)
            except ValueError as exc:
                problems.append(f"--llm-classes: class {c.name}: {exc}")
    return problems


class WeightedCycle:
    """Smooth weighted round robin over ``classes``: :meth:`next` gives the next class."""

    def __init__(self, classes: tuple[TrafficClass, ...]) -> None:
        if not classes:
            raise ValueError("WeightedCycle needs at least one class")
        self.classes = classes
        self._current = [0.0] * len(classes)
        self._total = sum(c.weight for c in classes)

    def next(self) -> TrafficClass:
        best = 0
        for i, c in enumerate(self.classes):
            self._current[i] += c.weight
            if self._current[i] > self._current[best]:
                best = i
        self._current[best] -= self._total
        return self.classes[best]
