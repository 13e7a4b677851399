"""Build ``LlmOptions`` through Locust's own parser: defaults, typed flags, web-UI edits.

Run in a child process (importing locust patches the interpreter with gevent). Prints one JSON
object: whether an empty command line gives ``LlmOptions()``, a few given values as typed, and
whether the Environment's options object follows in-place edits (what the web UI's form does).
"""

from __future__ import annotations

import json

from locust import events
from locust.argument_parser import get_parser

from loadknee_locust.plugin.options import LlmOptions, llm_options
from loadknee_locust.plugin.wiring import install

install(events)
parser = get_parser(default_config_files=[])
empty = LlmOptions.from_parsed(parser.parse_args([]))
given = LlmOptions.from_parsed(
    parser.parse_args(
        ["--llm-request-timeout", "7", "--llm-no-stream", "--llm-gpu", "none", "--run-time", "90"]
    )
)
ns = parser.parse_args(["--llm-levels", "1,2"])
env = type("Env", (), {})()
env.parsed_options = ns
first = llm_options(env)
ns.llm_levels = "4"  # what the web UI's start form does
ns.run_time = 30
edited = llm_options(env)
print(
    json.dumps(
        {
            "defaults": empty == LlmOptions(),
            "given": [given.request_timeout, given.stream, given.gpu, given.time_limit],
            "kept": llm_options(env) is edited,
            "edited": [first.levels, edited.levels, edited.time_limit],
        }
    )
)
