"""The example locustfiles, run with plain ``locust -f … --headless`` as the README shows them,
write the same run directory as ``loadknee run``: every file of the contract, every request the
simulator served exactly once, nothing but ok rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadknee_locust.contract import CSV_COLUMNS, RUN_JSON
from tests.support.paths import REPO
from tests.support.run_support import (
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


@pytest.mark.parametrize(
    ("locustfile", "extra", "batch"),
    [
        ("fixed_length.py", ["--llm-input-tokens", "48", "--llm-output-tokens", "8"], "1"),
        ("log_replay.py", ["--llm-prompt-log", "LOG"], "1"),
        ("batch.py", ["--llm-batch-size", "3", "--llm-output-tokens", "8"], "3"),
    ],
)
def test_example_locustfile_writes_the_run_directory(
    sim_server, tmp_path: Path, locustfile: str, extra: list[str], batch: str
) -> None:
    sim = sim_server(preset="fast")
    out = tmp_path / "runs"
    log = str(_write_log(tmp_path / "prod.jsonl"))
    extra = [log if a == "LOG" else a for a in extra]
    cmd = locust_cmd(
        "--headless", "--host", sim.url, "--stop-timeout", "30", "--llm-run-id", "ex",
        *sweep_args(out), *extra, locustfile=str(EXAMPLES / locustfile),
    )  # fmt: skip
    run(cmd, env=child_env())
    rd = read_run_dir(out / "ex")
    for name in (RUN_JSON, *CSV_COLUMNS):
        assert (rd.path / name).exists(), name
    check_run(rd, levels=[1, 2], baseline=3)
    # every row was served once, and every served request is a row or a calibration probe
    served = [str(rec["request_id"]) for rec in sim.log()]
    rows = [r["request_id"] for r in rd.requests]
    assert len(set(served)) == len(served) and len(set(rows)) == len(rows)
    assert set(rows) <= set(served)
    calibration = rd.info["prompt_source"].get("calibration", {})
    probes = sum(int(c.get("probes", 0)) for c in calibration.values())
    assert len(served) - len(rows) == probes, (len(served), len(rows), calibration)
    assert {r["outcome"] for r in rd.requests} == {"ok"}
    assert {r["batch_size"] for r in rd.requests} == {batch}
    assert "question" not in (rd.path / "requests.csv").read_text()  # no prompt text
