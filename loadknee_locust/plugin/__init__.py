"""The Locust wiring: options, the stepped shape, the per-Environment plugin and the web UI.

- :mod:`.wiring` — :func:`install` / :func:`register`: attach loadknee to an Environment (run
  directory, recorder, stage messages to workers, telemetry, web UI);
- :mod:`.shape` — ``SteppedShape`` / ``KneeShape``, the LoadTestShape that drives
  :mod:`loadknee_locust.schedule` tick by tick;
- :mod:`.judge` — the sweep's live judge: one long-lived analysis child, asked once per stage;
- :mod:`.childjobs` — one-off analysis children: ``python -m analysis.live``, the final report;
- :mod:`.options` — every ``--llm-*`` option, one field of the typed ``LlmOptions``, which
  also generates them on Locust's parser;
- :mod:`.validate` — check the options and the host before any load, every problem in one line;
- :mod:`.formcheck` — check the web UI start form's ``--llm-*`` values before Locust applies them;
- :mod:`.interrupt` — Ctrl-C / SIGTERM during a headless sweep: a graceful stop, then an
  immediate one;
- :mod:`.lifeline` — stop the load when its parent process or the master is gone;
- :mod:`.webui` — the live "Knee" tab and its CSV download;
- :mod:`.livepage` — the routes on Locust's web server: live page, run files, form script;
- :mod:`.liveview` — the live sweep view (status, charts, verdicts) as an HTML fragment;
- :mod:`.livetail` — the telemetry CSVs followed as they grow (KV cache, queue, GPU memory);
- :mod:`.svgchart` — small line charts as inline SVG, in pure Python.

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
