"""The knee's thresholds a run was judged with: recorded in run.json, used by the live judge and
by ``loadknee analyze`` unless a flag overrides one (the override said)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import configargparse
import pytest

from analysis.cli import main as analyze_main
from analysis.live import answer as live
from analysis.pipeline import analyze_run
from analysis.report.knee_summary import override_note
from loadknee_core.knee_params import KneeParams, overrides, run_knee_params
from loadknee_locust.plugin.options import add_arguments
from loadknee_locust.sim.launch import SimProcess
from tests.support.knee_rundir import saturating_run
from tests.support.run_support import child_env, only_run_dir


def _record(run_dir: Path, parameters: dict[str, object]) -> None:
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**info, "parameters": parameters}))


def test_the_live_judge_and_analyze_judge_with_the_recorded_thresholds(tmp_path: Path) -> None:
    run_dir = saturating_run(tmp_path / "run", capacity=4)
    plain = live.judge(str(run_dir))
    assert (plain["knee_users"], plain["max_concurrency"]) == (8, 4)
    _record(run_dir, {"knee_tail_ratio": 100.0})  # no tail ever departs: no knee
    judged = live.judge(str(run_dir))
    assert (judged["knee_users"], judged["max_concurrency"]) == (None, 16)
    analysis = analyze_run(run_dir)
    assert analysis.knee_params.tail_ratio == 100.0 and analysis.knee_overrides == ()
    assert (analysis.knee.knee_users, analysis.knee.max_concurrency) == (None, 16)
    overridden = analyze_run(run_dir, knee_overrides={"tail_ratio": 2.0})
    assert overridden.knee.knee_users == 8
    # words are the product: the warning a user reads when a flag overrides the run's threshold
    assert override_note(overridden.knee_overrides) == (
        "judged with --knee-tail-ratio 2.0 (the run's: 100.0)"
    )


def test_analyze_says_an_override_on_stderr(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    run_dir = saturating_run(tmp_path / "run", capacity=4)
    _record(run_dir, {"knee_tail_ratio": 100.0})
    assert analyze_main([str(run_dir), "--quiet", "--knee-tail-ratio", "3"]) == 0
    # words are the product: the warning a user reads when a flag overrides the run's threshold
    assert "--knee-tail-ratio 3.0 (the run's: 100.0)" in capsys.readouterr().err
    assert analyze_main([str(run_dir), "--quiet"]) == 0  # the run's own: nothing to say
    assert "judged with" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        ({}, KneeParams()),
        ({"knee_flat_gain_ratio": 0.3, "llm_red_line_error_pct": 0.0},
         KneeParams(flat_gain_ratio=0.3, red_line_error_pct=0.0)),
        # a run that recorded no knee_* value predates the shared red line (its 0 meant "never")
        ({"llm_red_line_error_pct": 0.0}, KneeParams()),
        ({"knee_flat_gain_ratio": "not a number", "knee_no_such": 1}, KneeParams()),
        ({"knee_sla_ms": 2500, "knee_sla_ms_x": None, "knee_noise_aware": 0,
          "knee_tail_percentile": "p99"}, KneeParams(sla_ms=2500, tail_percentile="p99")),
    ],
)  # fmt: skip
def test_run_knee_params(parameters: dict[str, object], expected: KneeParams) -> None:
    assert run_knee_params({"parameters": parameters}) == expected


@pytest.mark.parametrize(
    "params",
    [KneeParams(), KneeParams(tail_ratio=3.0, noise_aware=False, sla_ms=2500.0,
                              tail_percentile="p99", red_line_error_pct=0.0)],
)  # fmt: skip
def test_as_flags_gives_the_same_thresholds_back(params: KneeParams) -> None:
    """What verify passes to its re-run, read back as analyze (and run's Locust) read it."""
    from analysis.cli import build_parser
    from loadknee_core.knee_params import as_flags

    ns = build_parser().parse_args(["run", *as_flags(params)])
    assert KneeParams.from_cli_args(ns) == params


def test_no_note_when_nothing_differs() -> None:
    assert overrides(KneeParams(), KneeParams()) == ()
    assert override_note(()) is None


def test_the_sweep_parser_takes_the_knee_flags_and_the_red_line_once() -> None:
    parser = configargparse.ArgumentParser()
    add_arguments(parser)
    ns = parser.parse_args(["--knee-tail-ratio", "3", "--knee-ignore-noise"])
    # every threshold has a value on the namespace, so run.json records all of them
    assert KneeParams.from_cli_args(ns) == KneeParams(tail_ratio=3.0, noise_aware=False)
    assert ns.llm_red_line_error_pct == KneeParams().red_line_error_pct
    with pytest.raises(SystemExit):  # the red line is the sweep's own option there
        parser.parse_args(["--red-line-error-pct", "1"])


@pytest.mark.slow
def test_a_knee_flag_given_to_run_changes_the_live_decision_and_is_recorded(
    tmp_path: Path,
) -> None:
    """Thresholds under which the first level is already the knee: the adaptive sweep stops one
    level above it (``knee_confirmed``), where the defaults would have run the whole grid."""
    flags = ["--knee-tail-ratio", "0.01", "--knee-flat-gain", "10", "--knee-ignore-noise",
             "--client-cpu-limit", "1000", "--knee-resume-pct", "1000"]  # fmt: skip
    with SimProcess.start("fast", max_num_seqs=64) as sim:
        done = subprocess.run(
            [sys.executable, "-m", "loadknee_locust", "run", "--no-analyze", "--host", sim.url,
             "--levels", "2,4,8,16", "--stage-seconds", "2.5", "--warmup-seconds", "0.5",
             "--cooldown-seconds", "0.5", "--baseline-requests", "3", "--output-tokens", "16",
             # tests the recorded knee flags, not loadknee predict: skip the probe's ~2 s
             "--no-concurrency-probe", "--out", str(tmp_path), *flags],
            capture_output=True, text=True, timeout=180, env=child_env(),
        )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = only_run_dir(tmp_path)
    info = json.loads((run_dir / "run.json").read_text())
    parameters = info["parameters"]
    assert parameters["knee_tail_ratio"] == 0.01 and parameters["knee_flat_gain_ratio"] == 10
    assert parameters["knee_noise_aware"] is False
    assert parameters["knee_oom_pct"] == KneeParams().oom_pct  # every threshold, typed or not
    with (run_dir / "stages.csv").open(newline="") as fh:
        stages = list(csv.DictReader(fh))
    levels = [int(s["target_users"]) for s in stages if s["kind"] != "baseline"]
    assert levels == [2, 4], levels  # the knee at 2, one level above it, then the stop
    assert info["stop_reason"] == "knee_confirmed", info["stop_reason"]
    # the defaults see no knee in the same stages: they would not have stopped there
    assert analyze_run(run_dir, knee_params=KneeParams()).knee.knee_users is None
    assert analyze_run(run_dir).knee.knee_users == 2  # analyze reads the run's thresholds
