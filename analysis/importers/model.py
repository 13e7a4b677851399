"""Value objects an importer returns: one request, one concurrency level, one imported run.

Every importer turns another tool's files into these, and :mod:`analysis.importers.writer` alone
turns them into a loadknee run directory, so the run-directory rules (units, empty cells for
missing values, stage order) live in one place. A field the source does not record is None,
never 0: the writer leaves its cell empty and the analysis reads NaN.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict, Unpack

#: an HTTP error status standing alone in a tool's error text ("... 503 Service Unavailable")
_STATUS = re.compile(r"\b([45]\d\d)\b")


class ImportFormatError(ValueError):
    """A file that is not the expected format: names the file, what was expected, what was found."""

    def __init__(self, path: Path, expected: str, found: str) -> None:
        self.path = path
        self.expected = expected
        self.found = found
        super().__init__(f"{path}: expected {expected}; found {found}")


@dataclass(frozen=True)
class ImportedRequest:
    """One request as the source tool recorded it (times in unix s, durations in ms)."""

    start_unix_s: float | None
    end_unix_s: float | None
    e2e_ms: float | None
    ttft_ms: float | None = None
    #: gaps between streamed chunks (ms), when the source keeps them per request
    itl_ms: tuple[float, ...] | None = None
    #: the mean gap, when the source keeps only that
    itl_mean_ms: float | None = None
    chunks: int | None = None
    prompt_tokens: float | None = None
    completion_tokens: float | None = None
    outcome: str = "ok"
    http_status: int | None = None
    error: str = ""

    @staticmethod
    def failure(error: str) -> tuple[str, int | None]:
        """``outcome`` and ``http_status`` of a failed request from the text its tool recorded:
        the tools that keep only a message (GuideLLM, vLLM's benchmark) say the same thing the
        same way, so ``http_error`` with the status when the text carries one, else
        ``stream_error``."""
        found = _STATUS.search(error)
        return ("http_error", int(found.group(1))) if found else ("stream_error", None)


@dataclass(frozen=True)
class ImportedLevel:
    """All requests of one concurrency level (one file, one section, one artifact folder)."""

    concurrency: int
    requests: tuple[ImportedRequest, ...]
    source: str  # the file (and section) it came from, for messages


@dataclass(frozen=True)
class ImportedRun:
    """What one importer read: the levels plus the facts ``run.json`` must carry about them."""

    tool: str  # the --from name: vllm-bench, guidellm, aiperf
    tool_version: str  # as the files record it ("unknown" when they do not)
    files: tuple[Path, ...]
    levels: tuple[ImportedLevel, ...]
    endpoint: str = ""  # chat | completions | "" when unknown
    stream: bool | None = None
    model: str = ""
    target_url: str = ""
    usage_source: str = "server"  # server | estimate | none: how the tool counted tokens
    #: how each request's start time was obtained, in words (see the importer's docstring)
    start_times: str = "recorded per request by the tool"
    notes: tuple[str, ...] = field(default=())
    dropped: tuple[str, ...] = field(default=())  # what a half-written file lost, in words


class RunFacts(TypedDict, total=False):
    """The :class:`ImportedRun` fields a tool's files tell beside what :class:`Gathered` holds
    (typed, so an importer's misspelt or mistyped fact fails the type check, not a run)."""

    endpoint: str
    stream: bool | None
    model: str
    target_url: str
    usage_source: str
    start_times: str


@dataclass
class Gathered:
    """What an importer collects file by file: the levels it read, the tool versions the files
    name, its notes and what half-written files lost. :meth:`run` turns them into the
    :class:`ImportedRun`, so every importer freezes them, and joins the versions, the same way."""

    levels: list[ImportedLevel] = field(default_factory=list)
    versions: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    def run(self, tool: str, files: Iterable[Path], **facts: Unpack[RunFacts]) -> ImportedRun:
        """The imported run; ``facts`` are the :class:`ImportedRun` fields the tool's files
        tell (endpoint, stream, model, target_url, usage_source, start_times)."""
        return ImportedRun(
            tool=tool,
            tool_version=", ".join(sorted(self.versions)) or "unknown",
            files=tuple(files),
            levels=tuple(self.levels),
            notes=tuple(self.notes),
            dropped=tuple(self.dropped),
            **facts,
        )
