"""Write YAML values, keys and comments that every YAML reader reads back as the same thing.

A hand writer (rather than an emitter library) because the recommendations file puts each
setting's reason in a comment above it, which emitters drop. Plain scalars are where hand-written
YAML goes wrong — ``a: b`` or ``# x`` inside a string, ``no`` read as false, ``1e-07`` read as a
string by YAML 1.1 readers, a newline ending the line — so every string here is double-quoted
with escapes, and numbers are written in the one form YAML 1.1 and 1.2 readers both parse:

* None and pandas' missing markers → ``null``; booleans (numpy's too) → ``true`` / ``false``;
* integers (numpy's too) → digits; floats → the shortest repr that reads back to the same float,
  with a ``.0`` in the mantissa (``1.0e-07``), and NaN / ±inf as ``.nan`` / ``.inf`` / ``-.inf``;
* strings → double-quoted; ``\\``, ``"``, control characters, the Unicode line and paragraph
  separators, NEL, BOM and lone surrogates escaped; other Unicode written as is (UTF-8);
* lists and tuples → flow ``[a, b]``; mappings → flow ``{k: v}``; anything else → its ``str``.

Comments cannot be escaped, so :func:`comment` turns every character a YAML reader would take
as a line break (or reject) into a space.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from loadknee_core.numeric import is_missing

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\0": "\\0", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
#: a key written bare: a plain identifier that no YAML 1.1 reader takes for a bool or null
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def _printable(char: str) -> bool:
    """True for what YAML lets stand unescaped in a double-quoted scalar (and is no line break)."""
    code = ord(char)
    return (
        0x20 <= code <= 0x7E
        or 0xA0 <= code <= 0xD7FF
        or (0xE000 <= code <= 0xFFFD and code != 0xFEFF)
        or 0x10000 <= code <= 0x10FFFF
    ) and char not in "\u2028\u2029"


def _escape(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    if _printable(char):
        return char
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02X}"
    return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


def quoted(text: str) -> str:
    """``text`` as a double-quoted YAML scalar, one line whatever it holds."""
    return '"' + "".join(_escape(char) for char in text) + '"'


def _float(number: float) -> str:
    if math.isnan(number):
        return ".nan"
    if math.isinf(number):
        return ".inf" if number > 0 else "-.inf"
    text = repr(number)
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:  # YAML 1.1 reads 1e-07 as a string, 1.0e-07 as a float
        mantissa += ".0"
    return mantissa + e + exponent


def value(item: Any) -> str:
    """``item`` as a one-line YAML value (flow style for lists and mappings)."""
    if isinstance(item, bool | np.bool_):
        return "true" if item else "false"
    if isinstance(item, numbers.Integral):
        return str(int(item))
    if isinstance(item, numbers.Real):
        return _float(float(item))
    if isinstance(item, str):
        return quoted(item)
    if isinstance(item, Mapping):
        return "{" + ", ".join(f"{key(str(k))}: {value(v)}" for k, v in item.items()) + "}"
    if isinstance(item, list | tuple):
        return "[" + ", ".join(value(v) for v in item) + "]"
    if is_missing(item):
        return "null"
    return quoted(str(item))


def key(name: str) -> str:
    """``name`` as a mapping key: bare when it is a plain identifier, else double-quoted."""
    plain = _PLAIN_KEY.fullmatch(name) and name.lower() not in _RESERVED
    return name if plain else quoted(name)


def comment(text: str) -> str:
    """``text`` made safe for a ``#`` comment: line breaks and unprintable characters → spaces."""
    return "".join(char if _printable(char) or char == "\t" else " " for char in text)
