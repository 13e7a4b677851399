"""loadknee's Locust side: LLM users, the stepped shape, the recorder, telemetry, the simulator.

Importing this package does not import locust (and so does not monkey-patch the interpreter with
gevent): the simulator and ``analysis`` use parts of it from plain asyncio / pandas processes.
The Locust-facing names below are loaded on first use.
"""

from __future__ import annotations

from typing import Any

from loadknee_locust.lazy import load

__version__ = "0.2.0"  # the only place the version is written (pyproject reads it)

#: public name → module that defines it (imported lazily, on attribute access)
_LAZY: dict[str, str] = {
    "ChatUser": "loadknee_locust.client.users",
    "CompletionsUser": "loadknee_locust.client.users",
    "BatchCompletionsUser": "loadknee_locust.client.users",
    "LLMUser": "loadknee_locust.client.users",
    "KneeShape": "loadknee_locust.plugin.shape",
    "SteppedShape": "loadknee_locust.plugin.shape",
    "register": "loadknee_locust.plugin.wiring",
    "install": "loadknee_locust.plugin.wiring",
}


def __getattr__(name: str) -> Any:
    return load(__name__, _LAZY, name)


__all__ = sorted(_LAZY)
