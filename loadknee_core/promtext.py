"""Turn Prometheus exposition text into long-form samples, and label sets into one string and back.

Pure stdlib plus ``prometheus_client.parser`` (no gevent, no pandas): the sampler uses it while a
test runs and ``analysis`` uses it to read the ``labels`` column of ``server_metrics.csv`` back.

Why ``prometheus_client.parser`` rather than a regex: escaping in label values, ``NaN``/``+Inf``,
``# TYPE``/``# HELP`` lines and exemplars are all handled by the reference parser, and a body
that is not Prometheus text (an HTML error page, JSON) raises ``ValueError`` instead of yielding
nonsense rows. It is imported where a body is parsed, not with this module: with
``prometheus_client`` come ``http.server``, ``ssl`` and ``email``, and ``analysis`` (which
only reads label sets back) would pay that import before every answer.
"""

from __future__ import annotations

import io
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


def parse_text(text: str) -> Parsed:
    """Parse one ``/metrics`` body; never raises for bad input (the error is in the result)."""
    return parse_lines(io.StringIO(text))


def parse_lines(lines: Iterable[str]) -> Parsed:
    """:func:`parse_text` of a body given as its lines (each with its ``\\n``), read lazily:
    the scrape process hands them over at its own pace."""
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


def parse_labels(text: str) -> dict[str, str]:
    """Read back a label set written by :func:`render_labels` (empty text → empty dict).

    Uses the reference parser on a synthetic one-sample line, so the escaping rules match.
    Raises ``ValueError`` for text that is not a label set.
    """
    if not text:
        return {}
    parsed = parse_text(f"x{{{text}}} 0\n")
    if parsed.error or len(parsed.samples) != 1:
        raise ValueError(f"not a Prometheus label set: {_short(text)}")
    return dict(parsed.samples[0].labels)


def redact_url(url: str) -> str:
    """The URL with any ``user:password@`` removed, for logs and the ``endpoint`` column."""
    return strip_credentials(url)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
