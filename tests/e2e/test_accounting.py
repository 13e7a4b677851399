"""Every request loadknee sends is counted: the server's own count reconciles with the run
directory alone, with workers too (each worker's calibration probes are summed, never
replaced by the last worker's count).

Reads two recorded ``loadknee run`` sweeps (tests/support/recorded_runs.py) that other files
check for other things: one process (``--stage-seconds auto``) and ``--workers 2`` (count
mode). What only their real runs show, the server's own log against the rows, is checked here
on those runs instead of on two sweeps of this file's own.
"""

from __future__ import annotations

import json

import pytest

from loadknee_core.contract import REQUEST_COLUMNS
from loadknee_locust.client.concurrency_probe import BURST_SIZE
from tests.support.run_support import assert_each_served_once, read_csv

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("kind", "workers"), [("auto-local", 0), ("count-two-workers", 2)])
def test_server_count_equals_rows_plus_setup_requests(
    kind: str, workers: int, recorded_run
) -> None:
    recording = recorded_run(kind)
    info = json.loads((recording.path / "run.json").read_text())
    assert info["worker_count"] == workers
    rows = read_csv(recording.path / "requests.csv", REQUEST_COLUMNS)
    served = recording.sim_log
    load = [r for r in served if len(r["request_id"]) == 16]  # the users' own ids
    probes = [r for r in served if len(r["request_id"]) != 16]  # sent without an id
    assert_each_served_once(rows, [r["request_id"] for r in load])
    setup = info["prompt_source"]["setup_requests"]
    # the pre-flight (one short request before the sweep) is a probe sent without an id too
    assert setup["preflight_requests"] == 1, setup
    # the concurrency probe's two bursts go out once, from the pre-flight, whatever the workers
    assert setup["preflight_concurrency_probes"] == 2 * BURST_SIZE, setup
    kinds = ("calibration_probes", "preflight_requests", "preflight_concurrency_probes")
    assert sum(setup[kind] for kind in kinds) == len(probes), (setup, probes)
    assert setup["calibration_probes"] > 0
    assert setup.get("model_discovery", 0) >= max(workers, 1)
