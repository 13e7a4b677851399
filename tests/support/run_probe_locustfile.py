"""A minimal user for the recorder/shape tests: non-streaming chat, one loadknee row per request.

It stands in for helper B's users so these tests check the shape and the recorder alone: each
request carries ``X-Request-Id`` (the simulator logs it), and fires exactly one request event with
``context["loadknee"]`` holding the contract fields (no stage/phase/worker: the recorder adds them).
"""

from __future__ import annotations

import itertools
import json
import os
import time
import uuid

from locust import FastHttpUser, events, task

from loadknee_locust.plugin.shape import KneeShape  # noqa: F401
from loadknee_locust.plugin.wiring import install

install(events)


class ProbeUser(FastHttpUser):
    network_timeout = 30.0
    connection_timeout = 30.0

    def on_start(self) -> None:
        runner = self.environment.runner
        worker = getattr(runner, "worker_index", 0)
        user = uuid.uuid4().hex[:8]
        self._user = f"w{worker}u{user}"  # as the real users' rows carry one (clock order per user)
        self._ids = (f"{os.getpid()}w{worker}u{user}-{n}" for n in itertools.count())

    @task
    def chat(self) -> None:
        rid = next(self._ids)
        body = {
            "model": "sim-llm",
            "messages": [{"role": "user", "content": "hello " * 8}],
            "max_tokens": 24,
            "stream": False,
        }
        start = time.time()
        t0 = time.perf_counter()
        with self.client.post(
            "/v1/chat/completions",
            data=json.dumps(body),
            headers={"X-Request-Id": rid, "Content-Type": "application/json"},
            name="chat",
            catch_response=True,
        ) as resp:
            e2e = (time.perf_counter() - t0) * 1000.0
            ok = resp.status_code == 200
            if not ok:
                resp.failure(f"HTTP {resp.status_code}")
            resp.request_meta["response_time"] = e2e
            resp.request_meta["context"] = {
                "loadknee": {
                    "request_id": rid,
                    "user_id": self._user,
                    "endpoint": "chat",
                    "stream": False,
                    "start_unix_s": start,
                    "end_unix_s": start + e2e / 1000.0,
                    "e2e_ms": e2e,
                    "outcome": "ok" if ok else "http_error",
                    "http_status": resp.status_code,
                }
            }
