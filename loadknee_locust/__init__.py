"""loadknee's Locust side: LLM users, the stepped shape, the recorder, telemetry, the simulator.

- :mod:`.commands` — the ``loadknee`` command and its Locust-side subcommands;
- :mod:`.locustfiles` — the locustfile ``loadknee run`` uses by default;
- :mod:`.plugin` — what plugs into Locust: options, the stepped shape, live judge, web UI;
- :mod:`.client` — the request path: one user's request, its stream, timing and outcome;
- :mod:`.record` — writing the run directory: ``run.json``, ``requests.csv``, ``stages.csv``;
- :mod:`.prompts` — prompt sources: fixed lengths or a replayed prompt log;
- :mod:`.telemetry` — GPU, server ``/metrics`` and client CPU sampled beside the requests;
- :mod:`.schedule` — the stepped sweep as a pure state machine;
- :mod:`.refine` — what the adaptive sweep runs next, from the live knee;
- :mod:`.lazy` — public names loaded on first use;
- :mod:`.shape`, :mod:`.users` — old import paths, kept for older locustfiles;
- :mod:`.sim` — ``loadknee sim``, the simulated OpenAI-compatible server (asyncio, no locust).

Importing this package does not import locust (and so does not monkey-patch the interpreter with
gevent): the simulator and ``analysis`` use parts of it from plain asyncio / pandas processes.
The Locust-facing names below are loaded on first use.
"""

from __future__ import annotations

from loadknee_core import __version__ as __version__  # the old path of the version
from loadknee_locust.lazy import exports

#: public name → module that defines it (imported lazily, on attribute access)
__getattr__, __all__ = exports(
    __name__,
    {
        "ChatUser": "loadknee_locust.client.users",
        "CompletionsUser": "loadknee_locust.client.users",
        "BatchCompletionsUser": "loadknee_locust.client.users",
        "LLMUser": "loadknee_locust.client.users",
        "ConversationUser": "loadknee_locust.client.conversation",
        "KneeShape": "loadknee_locust.plugin.shape",
        "SteppedShape": "loadknee_locust.plugin.shape",
        "register": "loadknee_locust.plugin.wiring",
        "install": "loadknee_locust.plugin.wiring",
    },
)
