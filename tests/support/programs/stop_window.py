"""A Start at once after a run's end, in a real Locust runner with the real plugin (see
tests/loadknee_locust/plugin/test_stop_window.py for why). Run in a child process: it imports
locust, which patches the interpreter with gevent. Prints one JSON object of observations; its
one argument is the folder to run in (the default --llm-out is under it).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import gevent
from locust import LoadTestShape, User, constant, task
from locust.env import Environment
from locust.runners import STATE_STOPPED

from loadknee_locust.plugin.wiring import register
from loadknee_locust.telemetry.scrapeproc import EXIT_WAIT_S


class _Idle(User):
    wait_time = constant(0.05)

    @task
    def idle(self) -> None:
        pass


class _Short(LoadTestShape):
    """One user for 0.3 s from the shape's first tick, then the end; a later start holds its user
    (the test quits it). From the first tick, not from the start: Locust resets the shape's clock
    when it spawns the shape's greenlet, and on a loaded machine that greenlet first ticked past
    0.3 s, ended the second run before it began, and the test read a dropped Start (ci56, ci58).
    """

    def __init__(self) -> None:
        super().__init__()
        self.starts = 0
        self.first_tick: float | None = None

    def reset_time(self) -> None:
        super().reset_time()
        self.starts += 1
        self.first_tick = None

    def tick(self) -> tuple[int, float] | None:
        now = time.monotonic()
        if self.first_tick is None:
            self.first_tick = now
        hold = 0.3 if self.starts <= 1 else 60.0
        return (1, 1.0) if now - self.first_tick < hold else None


class _SlowToStop:
    """The real sampler, whose stop takes a second longer (a scrape child exiting under load)."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def stop(self) -> None:
        gevent.sleep(1.0)
        if self.real is not None:
            self.real.stop()


def _wait(check: Any, timeout: float = 10.0) -> bool:
    try:
        with gevent.Timeout(timeout):
            while not check():
                gevent.sleep(0.01)
    except gevent.Timeout:
        return False
    return True


os.chdir(sys.argv[1])
env = Environment(user_classes=[_Idle], shape_class=_Short())
runner = env.create_local_runner()
lk = register(env)
seen: dict[str, Any] = {}
try:
    runner.start_shape()
    _wait(lambda: lk.run is not None)
    first = lk.run
    assert first is not None
    lk._telemetry = _SlowToStop(lk._telemetry)
    seen["stopped"] = _wait(lambda: runner.state == STATE_STOPPED)
    runner.start_shape()  # the moment the runner says "stopped", as a user's second click
    # the second run starts once the first one's stop is done, however long that takes: up to
    # the scrape child's own exit wait (its start-up included) beside the stand-in's second
    stop_bound = EXIT_WAIT_S + 10.0
    seen["second_run"] = _wait(lambda: lk.run is not first and lk.run is not None, stop_bound)
    seen["first_closed"] = first.closed
    seen["first_dir"] = str(first.run_dir.resolve())
    seen["second_dir"] = str(lk.run.run_dir.resolve()) if lk.run is not None else None
finally:
    runner.quit()
    lk.close_run()
print(json.dumps(seen))
