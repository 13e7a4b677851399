"""Print every option string of Locust's parser with loadknee's options installed (JSON list).

Run in a child process: importing locust patches the interpreter with gevent.
"""

from __future__ import annotations

import json

from locust import events
from locust.argument_parser import get_parser

from loadknee_locust.plugin.wiring import install

install(events)
parser = get_parser(default_config_files=[])
print(json.dumps(sorted({s for a in parser._actions for s in a.option_strings})))
