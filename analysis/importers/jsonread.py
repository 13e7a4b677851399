"""Read a JSON export that may be half-written: keep every whole part, say what was cut.

A benchmark tool killed mid-write leaves a JSON document cut off somewhere. Rather than refuse the
whole file, :func:`read_json_object` decodes the top-level object member by member; when a member
is a list cut in the middle, the list keeps its whole elements (a cut element is dropped) and
decoding stops there. The result says which member was cut and how many elements survived, so an
importer can report exactly what was dropped. Deeper structures are never half-kept: an element
is either whole or gone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.importers.model import ImportFormatError

_DECODER = json.JSONDecoder()
_WS = " \t\r\n"


@dataclass(frozen=True)
class JsonRead:
    """The decoded object; ``cut`` is None for a whole file, else where it ends, in words."""

    data: dict[str, Any]
    cut: str | None = None
    cut_member: str | None = None  # the member whose list lost its tail


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _salvage_list(text: str, i: int) -> list[Any]:
    items: list[Any] = []
    i = _skip(text, i + 1)  # past "["
    while i < len(text):
        try:
            value, i = _DECODER.raw_decode(text, i)
        except json.JSONDecodeError:
            break
        items.append(value)
        i = _skip(text, i)
        if i < len(text) and text[i] == ",":
            i = _skip(text, i + 1)
        else:
            break
    return items


def _salvage_object(text: str) -> JsonRead:
    data: dict[str, Any] = {}
    i = _skip(text, 0)
    if not text.startswith("{", i):
        raise ValueError("not a JSON object")
    i = _skip(text, i + 1)
    while i < len(text) and text[i] != "}":
        try:
            key, i = _DECODER.raw_decode(text, i)
        except json.JSONDecodeError:
            return JsonRead(data, cut="cut inside a key")
        i = _skip(text, i)
        if not text.startswith(":", i):
            return JsonRead(data, cut=f"cut after key {key!r}")
        i = _skip(text, i + 1)
        try:
            value, i = _DECODER.raw_decode(text, i)
        except json.JSONDecodeError:
            if text.startswith("[", i):
                data[key] = _salvage_list(text, i)
                return JsonRead(data, cut=f"cut inside {key!r}", cut_member=str(key))
            return JsonRead(data, cut=f"cut inside {key!r} (dropped)")
        data[key] = value
        i = _skip(text, i)
        if text.startswith(",", i):
            i = _skip(text, i + 1)
    return JsonRead(data, cut=None if text.startswith("}", i) else "cut before its end")


def read_json_object(path: Path, expected: str) -> JsonRead:
    """Decode ``path`` as one JSON object, salvaging a cut file (see the module docstring).

    Raises :class:`ImportFormatError` for a file that is empty, not UTF-8, or not a JSON object.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ImportFormatError(path, expected, "a binary file (not UTF-8 text)") from None
    except OSError as exc:
        raise ImportFormatError(path, expected, f"an unreadable file ({exc.strerror})") from None
    if not text.strip():
        raise ImportFormatError(path, expected, "an empty file")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if not text.lstrip().startswith("{"):
            raise ImportFormatError(path, expected, f"text that is not JSON ({exc.msg})") from None
        at_end = exc.pos >= len(text.rstrip()) - 1 or "Unterminated" in exc.msg
        try:
            read = _salvage_object(text)
        except ValueError:
            raise ImportFormatError(path, expected, f"invalid JSON ({exc})") from None
        if read.cut is None or (not read.data and not at_end):
            raise ImportFormatError(path, expected, f"invalid JSON ({exc})") from None
        return read
    if not isinstance(data, dict):
        raise ImportFormatError(path, expected, f"a JSON {type(data).__name__}, not an object")
    return JsonRead(data)


def keys_text(data: dict[str, Any]) -> str:
    """An object's first keys, for an error that says what a file holds instead of the
    expected member: enough to recognise another tool's file without dumping a long one."""
    return ", ".join(list(data)[:6]) or "no keys"
