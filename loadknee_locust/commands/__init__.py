"""The ``loadknee`` command and its subcommands that live on the Locust side.

- :mod:`.cli` — dispatch ``loadknee <subcommand>``, importing only what that subcommand needs;
- :mod:`.run` — ``loadknee run``: build a Locust command line and run it in a child process;
- :mod:`.preflight` — before ``loadknee run``: check the target, the prompt log, the output folder;
- :mod:`.failures` — when every request of a run failed, say why with the top causes counted;
- :mod:`.demo` — ``loadknee demo``: simulator + sweep + analysis in one go;
- :mod:`.init` — ``loadknee init``: write a starter locustfile and a commented ``locust.conf``;
- :mod:`.verify` — ``loadknee verify``: re-run a short sweep and check the answer still holds;
- :mod:`.reference` — write ``docs/reference.md``, every option of every command, from the parsers.

``loadknee sim`` lives with the simulator (:mod:`loadknee_locust.sim.cli`); ``loadknee analyze``,
``compare`` and ``predict`` live in :mod:`analysis` (:mod:`analysis.cli`,
:mod:`analysis.compare.cli`, :mod:`analysis.predict.cli`).
"""
