"""The ``loadknee`` command and its subcommands that live on the Locust side.

- :mod:`.cli` — dispatch ``loadknee <subcommand>``, importing only what that subcommand needs;
- :mod:`.run` — ``loadknee run``: build a Locust command line and run it in a child process;
- :mod:`.demo` — ``loadknee demo``: simulator + sweep + analysis in one go.

``loadknee sim`` lives with the simulator (:mod:`loadknee_locust.sim.cli`); ``loadknee analyze``
and ``compare`` live in :mod:`analysis` (:mod:`analysis.cli`, :mod:`analysis.compare.cli`).
"""
