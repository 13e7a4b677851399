"""The example locustfiles, run with plain ``locust -f … --headless`` as the README shows them,
write the same run directory as ``loadknee run``: every file of the contract, every request the
simulator served exactly once, nothing but ok rows. Only a real Locust run shows a locustfile
working; the three run side by side from one fixture, each against its own simulator (short
sweeps of one and two users that mostly wait)."""

from __future__ import annotations

import json
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from loadknee_core.contract import CSV_COLUMNS, RUN_JSON
from loadknee_locust.sim.launch import SimProcess
from tests.support.paths import REPO
from tests.support.run_support import (
    RunDir,
    check_run,
    child_env,
    locust_cmd,
    read_run_dir,
    run,
    sweep_args,
)

pytestmark = pytest.mark.slow
EXAMPLES = REPO / "locustfiles"


def _write_log(path: Path) -> Path:
    with path.open("w") as f:
        for i in range(50):
            body = {"messages": [{"role": "user", "content": f"question {i} " + "word " * i}]}
            f.write(json.dumps({**body, "max_tokens": 8}) + "\n")
    return path


CASES = {
    "fixed_length.py": (["--llm-input-tokens", "48", "--llm-output-tokens", "8"], "1"),
    "log_replay.py": (["--llm-prompt-log", "LOG"], "1"),
    "batch.py": (["--llm-batch-size", "3", "--llm-output-tokens", "8"], "3"),
}


def _sweep(locustfile: str, folder: Path) -> tuple[RunDir, list[dict[str, Any]]]:
    """One example's sweep: its run directory and the simulator's log."""
    out = folder / "runs"
    log = str(_write_log(folder / "prod.jsonl"))
    extra = [log if a == "LOG" else a for a in CASES[locustfile][0]]
    with SimProcess.start("fast") as sim:
        cmd = locust_cmd(
            "--headless", "--host", sim.url, "--stop-timeout", "30", "--llm-run-id", "ex",
            *sweep_args(out), *extra, locustfile=str(EXAMPLES / locustfile),
        )  # fmt: skip
        run(cmd, env=child_env())
        return read_run_dir(out / "ex"), sim.log()


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Future[Any]]:
    with ThreadPoolExecutor(max_workers=len(CASES)) as pool:
        return {
            name: pool.submit(_sweep, name, tmp_path_factory.mktemp(name.removesuffix(".py")))
            for name in CASES
        }


@pytest.mark.parametrize("locustfile", list(CASES))
def test_example_locustfile_writes_the_run_directory(
    locustfile: str, sweeps: dict[str, Future[Any]]
) -> None:
    rd, sim_log = sweeps[locustfile].result()
    batch = CASES[locustfile][1]
    for name in (RUN_JSON, *CSV_COLUMNS):
        assert (rd.path / name).exists(), name
    check_run(rd, levels=[1, 2], baseline=3)
    # every row was served once, and every served request is a row or a calibration probe
    # (the prompt-length calibration's and the prefill probes', counted as setup requests)
    served = [str(rec["request_id"]) for rec in sim_log]
    rows = [r["request_id"] for r in rd.requests]
    assert len(set(served)) == len(served) and len(set(rows)) == len(rows)
    assert set(rows) <= set(served)
    source = rd.info["prompt_source"]
    probes = int(source.get("setup_requests", {}).get("calibration_probes", 0))
    calibrated = sum(int(c.get("probes", 0)) for c in source.get("calibration", {}).values())
    prefill = len(source.get("prefill_probes", []))
    assert probes == calibrated + prefill, source  # every prefill probe answered the simulator
    assert len(served) - len(rows) == probes, (len(served), len(rows), source)
    assert {r["outcome"] for r in rd.requests} == {"ok"}
    assert {r["batch_size"] for r in rd.requests} == {batch}
    assert "question" not in (rd.path / "requests.csv").read_text()  # no prompt text
