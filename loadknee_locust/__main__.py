"""``python -m loadknee_locust`` is the ``loadknee`` command."""

from loadknee_locust.commands.cli import main

raise SystemExit(main())
