"""A Start that follows a run's end at once is taken, however long the run's stop takes.

Locust marks the runner "stopped" before its ``test_stop`` listeners run and ends the shape only
after them (``Runner.stop``, then ``shape_worker`` clears ``shape_greenlet``), and it refuses a
new shape test while that greenlet is set ("There is an ongoing shape test running"). A listener
that yields -- the telemetry's last scrape stopping, a second or two on a loaded machine (ci39:
the web UI's second Start dropped) -- opened a window in which a Start was silently dropped.
Real Locust runner, real plugin, real telemetry; the one stand-in is the telemetry's stop taking
a second, as it does on a busy machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.paths import PROGRAMS


def test_a_start_at_once_after_the_end_is_taken_and_the_first_run_still_ends(
    tmp_path: Path,
) -> None:
    proc = subprocess.run(
        [sys.executable, str(PROGRAMS / "stop_window.py"), str(tmp_path)],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["stopped"] and seen["second_run"], (seen, proc.stderr[-3000:])
    assert seen["first_closed"] and seen["second_dir"] != seen["first_dir"]
    first = json.loads((Path(seen["first_dir"]) / "run.json").read_text())
    assert first["end_unix_s"] > 0  # the first run's end written once its stop finished
