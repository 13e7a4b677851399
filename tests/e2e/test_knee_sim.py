"""The knee found on real simulator runs lands where the sim's saturation function predicts.

Each case starts ``loadknee sim`` with different parameters, drives it through short stepped
closed-loop stages (tests/support/knee_simdriver.py: ~2 s per stage), writes a contract-shaped run
directory and runs the whole analysis on it (read_run → summary → baseline → knee → diagnosis →
recommendations). Levels are chosen so that ``c*`` sits on a tested level: when ``c*`` falls
midway between two levels the throughput still grows part of the way into the next one, and the
analysis (like the vLLM source's record table, where such a stage is "critical") puts the knee
one level later.

Each case is a real run: only a sweep of the simulator shows where its knee falls. The
``slots-4`` sweep is recorded once for the test run (tests/support/recorded_runs.py) and shared
with tests/e2e/test_traffic_sim.py.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from analysis.advice.facts import OwnLimitFact
from analysis.advice.recommend import recommend
from analysis.diagnosis.bottleneck import diagnose
from analysis.inputs.load import read_run
from analysis.knee.find import find_knee
from analysis.stages.baseline import compute_baseline
from analysis.stages.summary import summarize_stages
from loadknee_locust.sim.launch import SimProcess
from loadknee_locust.sim.params import preset
from loadknee_locust.sim.saturation import predicted_knee_level
from tests.support.knee_simdriver import DriveSpec, drive_sim
from tests.support.recorded_runs import SLOTS4_LEVELS, SLOTS4_SPEC

pytestmark = pytest.mark.slow

SPEC = {"warmup_s": 0.4, "measure_s": 1.5, "baseline_requests": 20}


def _analyse(sim: SimProcess, run_dir: Path, name: str, overrides: dict[str, Any],
             levels: tuple[int, ...]):  # fmt: skip
    """Drive one sim through ``levels``, analyse the run dir; (summary, knee, recs, predicted)."""
    spec = DriveSpec(levels=levels, **SPEC)
    drive_sim(sim.url, spec, run_dir, sim_preset=name)
    return _judge(run_dir, name, overrides, levels)


def _judge(run_dir: Path, name: str, overrides: dict[str, Any], levels: tuple[int, ...]):
    spec = DriveSpec(levels=levels, **SPEC)
    run = read_run(run_dir)
    summary = summarize_stages(run)
    baseline = compute_baseline(run, summary)
    knee = diagnose(summary, find_knee(summary, baseline), baseline)
    recs = recommend(summary, knee, baseline, run_info=run.run_info)
    params = preset(name, **overrides)
    predicted = predicted_knee_level(params, levels, spec.input_tokens, spec.output_tokens)
    return summary, knee, recs, predicted


def _explain(summary, knee) -> str:
    cols = ["target_users", "ok", "errors", "output_tok_s", "e2e_p95_ms", "kv_cache_peak_pct"]
    verdicts = "\n".join(f"{v.target_users}: {v.verdict} {v.reasons}" for v in knee.stages)
    return f"\n{summary[cols].to_string()}\n{verdicts}"


KNEE_CASES = {
    "slots-4": ("fast", {"max_num_seqs": 4}, (1, 2, 4, 8, 16), "queueing"),  # c* = 4
    "slots-16": ("fast", {"max_num_seqs": 16}, (4, 8, 16, 24), "queueing"),  # c* = 16
    # KV-limited: 704 tokens / (64 + 24) = 8 sequences fit; past them the sim preempts
    "kv-8": ("kv-tight", {"max_model_len": 512, "kv_cache_tokens": 704}, (2, 4, 8, 16), "memory"),
}
# dynamic memory: 4608 MiB + 4 MiB per KV token of 8192 → the engine crashes past ~10 streams
OOM = ("oom", {"kv_mib_per_token": 4, "restart_s": 5.0}, (1, 2, 4, 8, 16))


#: the case whose sweep is recorded once for the test run (tests/support/recorded_runs.py):
#: tests/e2e/test_traffic_sim.py reads the capacity of the same run
RECORDED = {"slots-4": "slots4-drive"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, recorded_run):
    """The sweeps, three at a time: every sim is started (and warm) before any sweep begins, so
    one's start-up CPU burst cannot disturb another's baseline; the drivers mostly wait. The
    recorded case is recorded (or found) first, on its own."""
    done: dict[str, Future[Any]] = {}
    for key, kind in RECORDED.items():
        assert KNEE_CASES[key][2] == SLOTS4_LEVELS and KNEE_CASES[key][1] == {"max_num_seqs": 4}
        assert DriveSpec(levels=SLOTS4_LEVELS, **SPEC) == SLOTS4_SPEC
        done[key] = Future()
        done[key].set_result(_judge(recorded_run(kind).path, *KNEE_CASES[key][:3]))
    cases = {key: case[:3] for key, case in KNEE_CASES.items() if key not in RECORDED}
    cases.update({"oom": OOM})
    with ExitStack() as stack:
        sims = {
            key: stack.enter_context(SimProcess.start(c[0], **c[1])) for key, c in cases.items()
        }
        with ThreadPoolExecutor(max_workers=3) as pool:  # 2 cores: keep the sims on time
            futures = {
                key: pool.submit(_analyse, sims[key], tmp_path_factory.mktemp(key) / "run", *case)
                for key, case in cases.items()
            }
        return {**done, **futures}


@pytest.mark.parametrize("case", list(KNEE_CASES))
def test_knee_lands_on_predicted_level(runs, case):
    levels, bottleneck = KNEE_CASES[case][2], KNEE_CASES[case][3]
    summary, knee, recs, predicted = runs[case].result()
    assert predicted is not None
    assert knee.knee_users == predicted, _explain(summary, knee)
    before = max(level for level in levels if level < predicted)
    assert knee.max_concurrency == before
    assert recs.get("max_concurrency") == before
    cap = next(i for i in recs.items if i.key == "vllm.max_num_seqs")
    kv = summary[summary["kind"] != "baseline"]["kv_cache_peak_pct"].max()
    if knee.server_slots is not None and kv < 0.85 * 85:
        # the knee is the server's own limit with KV to spare: raise it, never its current value
        assert cap.value > knee.server_slots, cap
        assert isinstance(cap.reason, OwnLimitFact) and cap.reason.flag == "--max-num-seqs", cap
    else:
        assert cap.value == before
    knee_stage = next(v for v in knee.stages if v.stage == knee.knee_stage)
    assert knee_stage.bottleneck == bottleneck, knee_stage.bottleneck_reason


def test_oom_crash_is_the_red_line(runs):
    summary, knee, recs, _ = runs["oom"].result()
    assert knee.red_line_users == 16, _explain(summary, knee)
    # ci90 (six test processes on 2 cores) read a knee at 8 users once: say why next time
    assert knee.knee_stage is None, _explain(summary, knee)
    assert knee.max_concurrency == 8, _explain(summary, knee)
    red = next(v for v in knee.stages if v.stage == knee.red_line_stage)
    assert red.bottleneck == "memory"
    assert any(s.name == "oom" and s.fired for s in red.signals)
    assert recs.get("vllm.gpu_memory_utilization") is not None  # memory led the failure
    assert knee.stages[-2].verdict == "critical"  # 8 users: memory past 85 % first
