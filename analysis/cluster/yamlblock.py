"""Block-style YAML from nested dicts and lists, with comments above any key (for manifests).

Scalars, keys and comment text go through :mod:`analysis.report.yaml_text`, so every reader reads
the
values back as written; a value wrapped in :class:`Commented` gets its comment lines above its
key. Kubernetes manifests, Prometheus rule files and the profile are written this way: an
emitter library would drop the comments that carry each threshold's evidence.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from analysis.report import yaml_text

WIDTH = 96


@dataclass(frozen=True)
class Commented:
    """A value with the comment lines written above its key (or list item)."""

    value: Any
    lines: tuple[str, ...]


def comment_lines(text: str, indent: int = 0, width: int = WIDTH) -> list[str]:
    """``text`` as ``#`` lines at ``indent``, wrapped to ``width``."""
    pad = " " * indent
    wrapped = textwrap.wrap(yaml_text.comment(text), max(20, width - indent - 2)) or [""]
    return [f"{pad}# {line}".rstrip() for line in wrapped]


def _is_block(value: Any) -> bool:
    return (isinstance(value, Mapping) and bool(value)) or (
        isinstance(value, list | tuple) and bool(value)
    )


def _unwrap(value: Any, indent: int, out: list[str]) -> Any:
    if isinstance(value, Commented):
        for line in value.lines:
            out += comment_lines(line, indent)
        return value.value
    return value


def dump_lines(node: Any, indent: int = 0) -> list[str]:
    """The lines of ``node`` (a mapping or a list) at ``indent`` spaces."""
    pad = " " * indent
    out: list[str] = []
    if isinstance(node, Mapping):
        for key, raw in node.items():
            value = _unwrap(raw, indent, out)
            name = yaml_text.key(str(key))
            out += _entry(f"{pad}{name}:", value, indent)
        return out
    if isinstance(node, Sequence) and not isinstance(node, str):
        for raw in node:
            value = _unwrap(raw, indent, out)
            if isinstance(value, Mapping) and value:
                inner = dump_lines(value, indent + 2)
                first = next(i for i, line in enumerate(inner) if not line.lstrip().startswith("#"))
                inner[first] = f"{pad}- " + inner[first][indent + 2 :]
                out += inner
            else:
                out += _entry(f"{pad}-", value, indent)
        return out
    return [pad + _scalar(node)]


def _entry(lead: str, value: Any, indent: int) -> list[str]:
    """``lead`` (``key:`` or ``-``) with ``value``: a block on the lines below it, indented two
    more spaces; a scalar on the same line."""
    if _is_block(value):
        return [lead, *dump_lines(value, indent + 2)]
    return [f"{lead} {_scalar(value)}"]


def _scalar(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, list | tuple):
        return "[]"
    return yaml_text.value(value)


def dump(node: Any, *, header: Sequence[str] = ()) -> str:
    """One YAML document: ``header`` as comment lines, then ``node``."""
    lines = [line for text in header for line in comment_lines(text)]
    return "\n".join([*lines, *dump_lines(node)]) + "\n"
