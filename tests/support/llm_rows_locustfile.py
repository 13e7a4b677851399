"""Test locustfile: the three LLM users plus a listener that dumps every request event as JSONL.

Rows go to the file named by ``LK_ROWS`` (one JSON object per request event: Locust's own fields
plus ``context["loadknee"]``), so tests can check exactly what the recorder would receive.
With ``LK_STOP_AFTER=N`` the run quits once N events were written (``-t`` is then a backstop):
a test that needs a request waits for one instead of a clock. Locust's ``-t`` timer starts from
gevent's cached loop time, which its start-up leaves stale (0.2 s unloaded, over a second on a
loaded machine), so a 1-second run could end before its user sent anything. With
``LK_QUIT_WHEN=PATH`` the run quits once that file exists: a test whose requests never end (a
server that stalls) has its server make the file when every request has arrived.
"""

from __future__ import annotations

import json
import os
from typing import Any

import gevent
from locust import events

from loadknee_locust.client.users import (
    BatchCompletionsUser,
    ChatUser,
    CompletionsUser,
    prompt_source_info,
)
from loadknee_locust.plugin import options


@events.init_command_line_parser.add_listener
def _options(parser: Any, **_kw: Any) -> None:
    options.add_arguments(parser)


_sink = open(os.environ["LK_ROWS"], "a", encoding="utf-8")  # noqa: SIM115 - closed at quit
_stop_after = int(os.environ.get("LK_STOP_AFTER") or 0)
_written = 0
_environment: Any = None


@events.init.add_listener
def _keep_environment(environment: Any, **_kw: Any) -> None:
    global _environment
    _environment = environment


@events.test_start.add_listener
def _watch_quit_file(environment: Any, **_kw: Any) -> None:
    path = os.environ.get("LK_QUIT_WHEN")
    if path:
        gevent.spawn(_quit_when_exists, environment, path)


def _quit_when_exists(environment: Any, path: str) -> None:
    while not os.path.exists(path):
        gevent.sleep(0.05)
    if environment.runner is not None:
        environment.runner.quit()  # as -t ends a headless run


@events.request.add_listener
def _row(
    request_type: str,
    name: str,
    response_time: float,
    response_length: int,
    exception: Any,
    context: dict,
    **_kw: Any,
) -> None:
    record = {
        "request_type": request_type,
        "name": name,
        "response_time": response_time,
        "response_length": response_length,
        "exception": None if exception is None else str(exception),
        "row": context.get("loadknee"),
    }
    _sink.write(json.dumps(record) + "\n")
    _sink.flush()
    global _written
    _written += 1
    if _written == _stop_after and _environment is not None and _environment.runner is not None:
        gevent.spawn(_environment.runner.quit)  # as -t ends a headless run


@events.quitting.add_listener
def _quit(environment: Any, **_kw: Any) -> None:
    info_path = os.environ.get("LK_INFO")
    if info_path:
        with open(info_path, "w", encoding="utf-8") as f:
            json.dump(prompt_source_info(environment), f)
    _sink.close()


class Chat(ChatUser):
    pass


class Completions(CompletionsUser):
    pass


class Batch(BatchCompletionsUser):
    pass
