"""Bring your own data: turn other benchmark tools' result files into loadknee run directories.

One module per tool reads its files into :class:`~analysis.importers.model.ImportedRun`;
:mod:`analysis.importers.writer` writes the run directory; ``loadknee import`` is
:mod:`analysis.importers.cli`. Nothing here imports locust or gevent.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from analysis.importers.model import ImportedRun, ImportFormatError

Reader = Callable[[list[Path]], ImportedRun]


def reader(tool: str) -> Reader:
    """The reader for a ``--from`` name (imported only when asked for)."""
    if tool == "guidellm":
        from analysis.importers.guidellm import read_guidellm

        return read_guidellm
    if tool == "aiperf":
        from analysis.importers.aiperf import read_aiperf

        return read_aiperf
    if tool == "vllm-bench":
        from analysis.importers.vllm_bench import read_vllm_bench

        return read_vllm_bench
    raise ValueError(f"unknown source {tool!r}; choose from {', '.join(SOURCES)}")


#: the ``--from`` names
SOURCES: tuple[str, ...] = ("vllm-bench", "guidellm", "aiperf")

__all__ = ["SOURCES", "ImportFormatError", "ImportedRun", "reader"]
