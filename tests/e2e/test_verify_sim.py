"""End to end on the simulator: each stage's output tok/s matches the server's own token counter,
and ``loadknee verify`` passes against the same server and fails (exit 1) with half the slots.

One original sweep by ``loadknee run`` (real Locust, loopback) against a simulator with 12 slots;
then ``loadknee verify`` twice: against the same simulator, and against one restarted with 6,
each with 5 s levels, 1 s warm-up and the original's 0.5 s cooldown.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from analysis.compare.verify import verify_checks
from analysis.diagnosis.failures import overloaded_stages
from analysis.pipeline import Analysis, analyze_run
from loadknee_locust.sim.launch import SimProcess
from tests.support.counter_check import stage_counts
from tests.support.run_support import loadknee

pytestmark = pytest.mark.slow

SLOTS = 12
LEVELS = "2,4,8,12,16,24"


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("verify")
    with SimProcess.start("fast", max_num_seqs=SLOTS) as sim:
        done = loadknee(
            "run", "--no-analyze", "--host", sim.url, "--levels", LEVELS, "--stage-seconds", "6",
            "--warmup-seconds", "1", "--cooldown-seconds", "0.5", "--baseline-requests", "10",
            "--out", str(out), "--run-id", "original",
            "--no-refine", "--stop-after-knee", "-1",  # every planned level, for the counters
            "--no-concurrency-probe",  # tests counters and verify, not predict: skip its ~2 s
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out, out / "original"


def test_each_stage_matches_the_servers_generation_token_counter(original) -> None:
    """The record table's token rule against the server's counter over the same span: the
    scrapes around each stage's window (tests/support/counter_check.py says why not the counter
    interpolated at the window's edges)."""
    _, run_dir = original
    steps = [c for c in stage_counts(run_dir, "vllm:generation_tokens_total") if c.kind == "step"]
    for c in steps:
        assert c.table_tok_s_aligned == pytest.approx(c.server_tok_s_aligned, rel=0.02), c
    assert len(steps) == len(LEVELS.split(","))


def _verify(run_dir: Path, slots: int, common: list[str], run_id: str) -> CompletedProcess[str]:
    with SimProcess.start("fast", max_num_seqs=slots) as sim:
        return loadknee("verify", str(run_dir), "--host", sim.url, *common, "--run-id", run_id)


def test_verify_passes_on_the_same_server_and_fails_with_half_the_slots(original) -> None:
    out, run_dir = original
    before = analyze_run(run_dir)
    assert before.knee.max_concurrency == SLOTS, before.knee.summary
    # the original's 0.5 s cooldown, through verify's pass-through to ``loadknee run``: the
    # default 10 s after each re-run level was most of this test's time (each re-run level, twice)
    # and drains nothing the stop at each level's end has not (the next level waits for the
    # users to stop, then discards its first second as warm-up)
    common = ["--stage-seconds", "5", "--warmup-seconds", "1", "--out", str(out)]
    common += ["--cooldown-seconds", "0.5"]
    # verify's checks read the stages, not loadknee predict: the re-runs skip the probe's ~2 s
    common += ["--no-concurrency-probe"]
    # the two re-runs at once, each against its own simulator (their waits overlap)
    with ThreadPoolExecutor(2) as pool:
        same_run = pool.submit(_verify, run_dir, SLOTS, common, "same")
        half_run = pool.submit(_verify, run_dir, SLOTS // 2, common, "half")
        same, half = same_run.result(), half_run.result()
    if same.returncode == 3:  # the throughput check failed on a machine overloaded at 12
        _machine_cannot_tell(before, out / "same", same.stdout)
    else:
        assert same.returncode == 0, same.stdout[-3000:] + same.stderr[-3000:]
        # words are the product: the PASS/FAIL lines a rollout script gates on
        assert "verify: PASS (3 of 3 checks passed)" in same.stdout
    assert (out / "same" / "verify.txt").read_text().startswith("PASS  recommended_level")
    assert ",refine," not in (out / "same" / "stages.csv").read_text()  # only the named levels
    assert half.returncode == 1, half.stdout[-3000:] + half.stderr[-3000:]
    # the re-run, judged with the original's thresholds as verify judges it: its max_concurrency
    # (12 users, past the halved server's slots) is the knee, and its FAIL line says so
    after = analyze_run(out / "half", knee_params=before.knee_params)
    recommended = verify_checks(before.summary, before.knee, after.summary, after.knee)[0]
    found = (recommended.name, recommended.passed, recommended.users, recommended.verdict)
    assert found == ("recommended_level", False, SLOTS, "knee"), found
    assert f"FAIL  recommended_level: {recommended.text}" in half.stdout
    if "CANNOT TELL  throughput" in half.stdout:
        _machine_cannot_tell(before, out / "half", half.stdout)
    else:  # words are the product: the PASS/FAIL lines a rollout script gates on
        assert "FAIL  throughput" in half.stdout
    # words are the product: the PASS/FAIL lines a rollout script gates on
    assert "verify: FAIL" in half.stdout


def _machine_cannot_tell(before: Analysis, rerun: Path, printed: str) -> None:
    """A CANNOT TELL throughput line only with its evidence: the runs' own host-load figure at
    the checked level, at or past the overloaded rule on this machine's CPUs (this suite beside
    other test processes on 2 cores), the server on loopback."""
    after = analyze_run(rerun, knee_params=before.knee_params)
    busy = (
        *overloaded_stages(before.summary, before.run.run_info),
        *overloaded_stages(after.summary, after.run.run_info),
    )
    checks = verify_checks(before.summary, before.knee, after.summary, after.knee, overloaded=busy)
    throughput = checks[1]
    assert throughput.outcome == "CANNOT TELL", throughput
    fact = throughput.overloaded
    assert fact is not None and fact.users == SLOTS, fact
    assert fact.host_load_1m >= fact.limit_per_cpu * fact.host_cpus, fact
    loads = [
        row["host_load_1m"]
        for side in (before, after)
        for row in side.summary.to_dict(orient="records")
        if row["target_users"] == SLOTS
    ]
    assert fact.host_load_1m in loads, (fact, loads)  # the runs' own figure
    # words are the product: the line a rollout script gates on
    assert f"CANNOT TELL  throughput: {throughput.text}" in printed
