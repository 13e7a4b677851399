"""``python -m loadknee_locust`` is the ``loadknee`` command."""

from loadknee_locust.cli import main

raise SystemExit(main())
