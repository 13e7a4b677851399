"""Load a package's public names on first use, so importing the package does not import locust.

A package lists ``name → defining module`` and forwards its module ``__getattr__`` (PEP 562) to
:func:`load`; the locust-facing modules are then imported only when a locustfile asks for them,
and the simulator and ``analysis`` can import the package without gevent patching the process.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


def load(package: str, table: Mapping[str, str], name: str) -> Any:
    """``table[name]``'s attribute ``name``, imported now; AttributeError for any other name."""
    module = table.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
