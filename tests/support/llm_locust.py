"""Run ``tests/support/llm_rows_locustfile.py`` headless in a subprocess and return its request
events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCUSTFILE = Path(__file__).with_name("llm_rows_locustfile.py")


@dataclass
class LocustResult:
    returncode: int
    events: list[dict[str, Any]]
    info: dict[str, Any]
    output: str

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [e["row"] for e in self.events]


def run_locust(
    tmp: Path,
    host: str,
    user_classes: list[str],
    *,
    users: int = 1,
    seconds: int = 2,
    extra: list[str] | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = 90.0,
    locustfile: Path = LOCUSTFILE,
    stop_after_events: int = 0,
    quit_when: Path | None = None,
) -> LocustResult:
    """``stop_after_events``: quit once that many request events were written (``seconds``
    is then only a backstop), for a test that needs requests rather than a length of run;
    ``quit_when``: quit once that file exists (a test's server makes it)."""
    rows, info = tmp / "rows.jsonl", tmp / "info.json"
    rows.unlink(missing_ok=True)
    argv = [
        sys.executable, "-m", "locust", "-f", str(locustfile), "--headless",
        "-u", str(users), "-r", str(users), "-t", f"{int(seconds)}s", "--stop-timeout", "10",
        "-H", host, "--only-summary", *user_classes, *(extra or []),
    ]  # fmt: skip
    full_env = {**os.environ, "LK_ROWS": str(rows), "LK_INFO": str(info),
                "LK_STOP_AFTER": str(stop_after_events), "LK_QUIT_WHEN": str(quit_when or ""),
                **(env or {})}  # fmt: skip
    proc = subprocess.run(
        argv, env=full_env, capture_output=True, text=True, timeout=timeout_s, cwd=tmp
    )
    events = [json.loads(x) for x in rows.read_text().splitlines()] if rows.exists() else []
    loaded = json.loads(info.read_text()) if info.exists() else {}
    return LocustResult(proc.returncode, events, loaded, proc.stdout + proc.stderr)
