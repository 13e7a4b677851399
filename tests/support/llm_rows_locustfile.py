"""Test locustfile: the three LLM users plus a listener that dumps every request event as JSONL.

Rows go to the file named by ``LK_ROWS`` (one JSON object per request event: Locust's own fields
plus ``context["loadknee"]``), so tests can check exactly what the recorder would receive.
"""

from __future__ import annotations

import json
import os
from typing import Any

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
