"""Load a package's public names on first use, so importing the package does not import locust.

A package lists ``name → defining module`` and takes its module ``__getattr__`` (PEP 562) and
``__all__`` from :func:`exports`; the locust-facing modules are then imported only when a
locustfile asks for them, and the simulator and ``analysis`` can import the package without gevent
patching the process.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def load(package: str, table: Mapping[str, str], name: str) -> Any:
    """``table[name]``'s attribute ``name``, imported now; AttributeError for any other name."""
    module = table.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def exports(package: str, table: Mapping[str, str]) -> tuple[Callable[[str], Any], list[str]]:
    """A package's module ``__getattr__`` (forwarding to :func:`load`) and its ``__all__``: each
    lazy package states only its table."""

    def forward(name: str) -> Any:
        return load(package, table, name)

    return forward, sorted(table)
