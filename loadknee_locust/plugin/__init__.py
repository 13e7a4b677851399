"""The Locust wiring: options, the stepped shape and the per-Environment plugin.

- :mod:`.wiring` — :func:`install` / :func:`register`: attach loadknee to an Environment (run
  directory, recorder, stage messages to workers, telemetry, web UI);
- :mod:`.shape` — ``SteppedShape`` / ``KneeShape``, the LoadTestShape that drives
  :mod:`loadknee_locust.sweep.schedule` tick by tick;
- :mod:`.options` — every ``--llm-*`` option, one field of the typed ``LlmOptions``, which
  also generates them on Locust's parser;
- :mod:`.validate` — check the options and the host before any load, every problem in one line;
- :mod:`.interrupt` — Ctrl-C / SIGTERM during a headless sweep: a graceful stop, then an
  immediate one;
- :mod:`.lifeline` — stop the load when its parent process or the master is gone.

The sweep's schedule and judge are in :mod:`loadknee_locust.sweep`, the web UI's tab in
:mod:`loadknee_locust.webui`.

Importing this package does not import locust; the names below load on first use, so
``from loadknee_locust.plugin import install`` keeps working for locustfiles written before the
package layout.
"""

from __future__ import annotations

from loadknee_locust.lazy import exports

__getattr__, __all__ = exports(
    __name__,
    {
        "install": "loadknee_locust.plugin.wiring",
        "register": "loadknee_locust.plugin.wiring",
        "Loadknee": "loadknee_locust.plugin.wiring",
        "loadknee_of": "loadknee_locust.plugin.wiring",
    },
)
