"""Parse ``--llm-seed 5`` with Locust's own parser after ``install(events)``; print the options.

Run in a child process from the directory holding the ``pyproject.toml`` / ``locust.conf`` under
test (importing locust patches the interpreter with gevent). Prints one JSON object.
"""

from __future__ import annotations

import json

from locust import events
from locust.argument_parser import get_parser

from loadknee_locust.plugin.wiring import install

NAMES = ("llm_levels", "llm_stage_requests", "llm_input_tokens", "llm_output_tokens", "llm_seed")

install(events)
ns = get_parser().parse_args(["--llm-seed", "5"])
print(json.dumps({k: getattr(ns, k) for k in NAMES}))
