"""Open-loop Locust runs against the simulator, for the e2e open-loop files
(tests/e2e/test_openloop_sim.py and its timing checks, tests/e2e/test_openloop_timing_sim.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadknee_locust.sim.launch import SimProcess
from tests.support.paths import REPO
from tests.support.run_support import child_env, locust_cmd, only_run_dir, run

OPENLOOP = str(REPO / "loadknee_locust" / "locustfiles" / "openloop.py")
EXAMPLE = str(REPO / "locustfiles" / "open_loop.py")


def openloop_locust(
    sim: SimProcess, out: Path, *args: str, timeout: float = 60.0, locustfile: str = OPENLOOP
) -> Path:
    """Run Locust headless on ``locustfile`` against ``sim`` with ``args``; its run directory."""
    run(
        locust_cmd(
            "--headless", "--only-summary", "-H", sim.url, "--stop-timeout", "30",
            "--llm-out", str(out), "--llm-cooldown-seconds", "0.5",
            *args,
            locustfile=locustfile,
        ),
        timeout=timeout,
        env=child_env(),
    )  # fmt: skip
    return only_run_dir(out)


def load_records(sim: SimProcess) -> list[dict[str, Any]]:
    """The simulator's records of the load: the requests with the users' own 16-character ids
    (the probes before the sweep send none, and the simulator gives them 32)."""
    return [rec for rec in sim.log() if len(rec["request_id"]) == 16]


def num(row: dict[str, str], key: str) -> float:
    """A run-directory CSV cell as a number."""
    return float(row[key])
