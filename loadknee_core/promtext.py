"""Turn Prometheus exposition text into long-form samples, and label sets into one string and back.

Pure stdlib plus ``prometheus_client.parser`` (no gevent, no pandas): the sampler uses it while a
test runs and ``analysis`` uses it to read the ``labels`` column of ``server_metrics.csv`` back.

Why ``prometheus_client.parser`` rather than a regex: escaping in label values, ``NaN``/``+Inf``,
``# TYPE``/``# HELP`` lines and exemplars are all handled by the reference parser, and a body
that is not Prometheus text (an HTML error page, JSON) raises ``ValueError`` instead of yielding
nonsense rows. It is imported where a body is parsed, not with this module: with
``prometheus_client`` come ``http.server``, ``ssl`` and ``email``, and ``analysis`` (which
only reads label sets back) would pay that import before every answer.

Reading a label set back (:func:`parse_labels`) is the one place that does not call the
library: the text is one :func:`render_labels` wrote, a closed format (``name="value"`` pairs,
three escapes), and importing ``prometheus_client`` to read it cost ``analyze`` 25 ms of a
0.55-s answer. The tests hold it to the reference parser on a table of label sets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from loadknee_core.redaction import strip_credentials


@dataclass(frozen=True)
class Sample:
    """One Prometheus sample: its name as exposed (``_total``/``_bucket`` kept), labels, value."""

    metric: str
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Parsed:
    """What one scrape body yielded: the samples read, and the parse error that stopped it, if any.

    Samples before a malformed line are kept (nothing else is lost); ``error`` says why the rest
    was not read.
    """

    samples: tuple[Sample, ...]
    error: str | None = None


def parse_lines(lines: Iterable[str]) -> Parsed:
    """Parse one ``/metrics`` body given as its lines (each with its ``\\n``; a ``StringIO`` of
    the text will do), read lazily: the scrape process hands them over at its own pace. Never
    raises for bad input (the error is in the result)."""
    from prometheus_client.parser import text_fd_to_metric_families  # see the module's docstring

    samples: list[Sample] = []
    try:
        for family in text_fd_to_metric_families(lines):  # type: ignore[arg-type]  # iterates only
            for s in family.samples:
                samples.append(Sample(s.name, dict(s.labels), float(s.value)))
    except Exception as exc:  # the parser raises ValueError, and others on odd input
        return Parsed(tuple(samples), f"not Prometheus text: {_short(str(exc))}")
    return Parsed(tuple(samples))


def render_labels(labels: Mapping[str, str]) -> str:
    """Render a label set as ``k="v",k2="v2"`` (sorted by key, Prometheus escaping)."""
    return ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))


#: one ``name="value"`` pair of a label set, the value with its escapes still in
_LABEL_PAIR = re.compile(
    r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|\Z)', re.DOTALL
)
#: the escapes of the exposition format; any other backslash is kept as written, as the
#: reference parser keeps it
_ESCAPES = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
_ESCAPED = re.compile(r'\\[\\n"]')


def parse_labels(text: str) -> dict[str, str]:
    """Read back a label set written by :func:`render_labels` (empty text → empty dict).

    The whole text must be ``name="value"`` pairs separated by commas (spaces and a trailing
    comma allowed, as in the exposition format); escapes are undone as the reference parser
    undoes them. Raises ``ValueError`` for text that is not a label set.
    """
    labels: dict[str, str] = {}
    at = 0
    while at < len(text):
        pair = _LABEL_PAIR.match(text, at)
        if pair is None or pair.end() == at:
            raise ValueError(f"not a Prometheus label set: {_short(text)}")
        name, value, comma = pair.groups()
        labels[name] = _ESCAPED.sub(lambda m: _ESCAPES[m.group(0)], value)
        at = pair.end()
        if not comma and at < len(text):
            raise ValueError(f"not a Prometheus label set: {_short(text)}")
    return labels


def redact_url(url: str) -> str:
    """The URL with any ``user:password@`` removed, for logs and the ``endpoint`` column."""
    return strip_credentials(url)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
