"""The Locust wiring: options, the stepped shape, the per-Environment plugin and the web UI tab.

- :mod:`.options` — every ``--llm-*`` option, one field of the typed ``LlmOptions``, which
  also generates them on Locust's parser;
- :mod:`.wiring` — :func:`install` / :func:`register`: attach loadknee to an Environment (run
  directory, recorder, stage messages to workers, telemetry, web UI);
- :mod:`.shape` — ``SteppedShape`` / ``KneeShape``, the LoadTestShape that drives
  :mod:`loadknee_locust.schedule` tick by tick;
- :mod:`.webui` — the live "Knee" tab.

Importing this package does not import locust; the names below load on first use, so
``from loadknee_locust.plugin import install`` keeps working for locustfiles written before the
package layout.
"""

from __future__ import annotations

from typing import Any

from loadknee_locust.lazy import load

_LAZY: dict[str, str] = {
    "install": "loadknee_locust.plugin.wiring",
    "register": "loadknee_locust.plugin.wiring",
    "Loadknee": "loadknee_locust.plugin.wiring",
    "loadknee_of": "loadknee_locust.plugin.wiring",
}


def __getattr__(name: str) -> Any:
    return load(__name__, _LAZY, name)


__all__ = sorted(_LAZY)
