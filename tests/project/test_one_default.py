"""One default and one meaning per setting the sweep and the analysis share: the red line, the
SLO targets and the memory threshold, listed for both sides and checked to agree."""

from __future__ import annotations

import ast
import json
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import configargparse
import pandas as pd
import pytest

from analysis.advice.facts import BaseCapacityFact
from analysis.cli import build_parser as analyze_parser
from analysis.knee.signals import StageContext, error_signals
from analysis.pipeline import analyze_run
from analysis.report.advice_words import reason_text
from analysis.stages.intervals import IntervalParams
from loadknee_core.contract import INTERVAL_TARGET_PCT, RED_LINE_ERROR_PCT
from loadknee_core.knee_params import KneeParams
from loadknee_core.slo_targets import SloParams, run_slo_params
from loadknee_locust.commands import run as run_cmd
from loadknee_locust.plugin.options import LlmOptions, add_arguments
from loadknee_locust.sweep.schedule import RedLine, SchedulePlan
from tests.support.knee_rundir import saturating_run
from tests.support.paths import REPO
from tests.support.report_fixtures import write_run_dir

#: the one home of the red line's error comparison
RED_LINE_HOME = REPO / "loadknee_core" / "red_line.py"
#: the homes of the shared thresholds' defaults: the knee's parameters, the run-directory contract
THRESHOLD_HOMES = (
    REPO / "loadknee_core" / "knee_params.py",
    REPO / "loadknee_core" / "contract.py",
)


def _sweep_parser() -> configargparse.ArgumentParser:
    parser = configargparse.ArgumentParser()
    add_arguments(parser)
    return parser


def _sweep_values(argv: list[str]) -> dict[str, Any]:
    """run.json's ``parameters`` for a sweep given ``argv`` (what the plugin's parser holds)."""
    return vars(_sweep_parser().parse_args(argv))


def test_the_red_line_has_one_default() -> None:
    sweep = {
        "LlmOptions": LlmOptions().red_line_error_pct,
        "RedLine": RedLine().error_pct,
        "--llm-red-line-error-pct": _sweep_values([])["llm_red_line_error_pct"],
    }
    analysis = {"KneeParams": KneeParams().red_line_error_pct}
    assert set(sweep.values()) == set(analysis.values()) == {RED_LINE_ERROR_PCT}, (sweep, analysis)
    # analyze has no default of its own: the run's recorded value, else the shared one
    assert not hasattr(analyze_parser().parse_args(["run"]), "knee_red_line_error_pct")


def test_the_interval_target_has_one_default() -> None:
    """The ±% an ``auto`` stage is held to and the one the analysis says a stage would need."""
    plan = {f.name: f.default for f in fields(SchedulePlan)}
    sweep = {
        "LlmOptions": LlmOptions().stage_precision_pct,
        "SchedulePlan": plan["precision_pct"],
        "--llm-stage-precision-pct": _sweep_values([])["llm_stage_precision_pct"],
    }
    analysis = {
        "KneeParams": KneeParams().target_interval_pct,
        "IntervalParams": IntervalParams().target_pct,
    }
    assert set(sweep.values()) == set(analysis.values()) == {INTERVAL_TARGET_PCT}, (sweep, analysis)


@pytest.mark.parametrize("limit", [0.0, 5.0, 20.0, 100.0])
@pytest.mark.parametrize(("served", "failed"), [(100, 0), (99, 1), (95, 5), (94, 6), (0, 10)])
def test_the_red_line_means_the_same_to_the_sweep_and_the_analysis(
    limit: float, served: int, failed: int
) -> None:
    """The sweep stops at the stage the analysis calls the red line, and only there."""
    stops = RedLine(error_pct=limit).crossed(requests=served + failed, errors=failed, p95_ms=None)
    row = pd.Series({"success_pct": 100.0 * served / (served + failed), "errors": failed,
                     "ok": served})  # fmt: skip
    ctx = cast(StageContext, SimpleNamespace(params=KneeParams(red_line_error_pct=limit)))
    _some, red = error_signals(row, ctx)
    assert stops == red.fired, (limit, served, failed)


def _error_share_comparisons(path: Path) -> list[int]:
    """Lines of ``path`` that order a ``*error_pct`` value against something other than a literal
    (how a copy of the red line's rule reads: ``share > red_line_error_pct``)."""

    def named(node: ast.expr) -> bool:
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
        return name.endswith("error_pct")

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare) and any(
            isinstance(op, ast.Gt | ast.GtE | ast.Lt | ast.LtE) for op in node.ops
        ):
            sides = [node.left, *node.comparators]
            if any(
                named(side) and not all(isinstance(o, ast.Constant) for o in sides if o is not side)
                for side in sides
            ):
                found.append(node.lineno)
    return found


def test_the_red_line_rule_has_one_home() -> None:
    """Only :mod:`loadknee_core.red_line` holds an error share against the limit (``RedLine.
    enabled``'s "< 100" asks whether the rule is on, not whether it fired: left out)."""
    copies = {
        f"{path.relative_to(REPO)}:{line}"
        for package in ("loadknee_core", "analysis", "loadknee_locust")
        for path in sorted((REPO / package).rglob("*.py"))
        if path != RED_LINE_HOME
        for line in _error_share_comparisons(path)
    }
    assert copies == set(), copies


def test_loadknee_run_and_analyze_take_the_red_line_under_one_name() -> None:
    args = run_cmd.build_parser().parse_args(["--host", "http://x", "--red-line-error-pct", "2"])
    cmd = run_cmd.locust_command(args, [])
    assert cmd[cmd.index("--llm-red-line-error-pct") + 1] == "2"
    assert analyze_parser().parse_args(["run", "--red-line-error-pct", "2"]).knee_red_line_error_pct
    assert "--red-line-error-pct" not in _sweep_parser().format_help()  # once, as the sweep's


@pytest.mark.parametrize(
    ("run_argv", "analyze_argv"),
    [
        (["--slo", "ttft_p95_ms=500,tpot_p95_ms=50"], ["--slo", "ttft_p95_ms=500,tpot_p95_ms=50"]),
        (["--slo", "ttft_p95_ms=500", "--slo", "tpot_p95_ms=50"],
         ["--slo", "ttft_p95_ms=500", "--slo", "tpot_p95_ms=50"]),
        (["--slo", "ttft_p95_ms=500,tpot_p95_ms=50"],
         ["--slo", "ttft_p95_ms=500", "--slo", "tpot_p95_ms=50"]),
    ],
)  # fmt: skip
def test_the_slo_targets_have_one_form(run_argv: list[str], analyze_argv: list[str]) -> None:
    """What ``loadknee run --slo`` records is what ``analyze --slo`` reads, in either form."""
    args = run_cmd.build_parser().parse_args(["--host", "http://x", *run_argv])
    cmd = run_cmd.locust_command(args, [])
    recorded = _sweep_values(["--llm-slo", cmd[cmd.index("--llm-slo") + 1]])
    from_run = run_slo_params({"parameters": recorded})
    typed = SloParams.from_cli_args(analyze_parser().parse_args(["run", *analyze_argv]))
    assert from_run.slos == typed.slos and len(typed.slos) == 2
    assert SloParams().given is False and LlmOptions().slo == ""  # no targets unless given


def test_every_knee_threshold_has_one_default_on_both_sides() -> None:
    """The sweep records every threshold with the analysis's default; analyze sets none of its
    own, so the run's recorded value stands unless a flag is typed."""
    recorded = _sweep_values([])
    defaults = KneeParams()
    sweep = {k[len("knee_") :]: v for k, v in recorded.items() if k.startswith("knee_")}
    assert sweep, "the sweep's parser has no knee thresholds"
    assert {k: getattr(defaults, k) for k in sweep} == sweep
    assert "memory_pressure_pct" in sweep and "memory_source" in sweep
    typed = analyze_parser().parse_args(["run"])
    assert not [k for k in vars(typed) if k.startswith("knee_")]


def test_the_memory_threshold_in_the_advice_is_the_one_judged_with(tmp_path: Path) -> None:
    run_dir = saturating_run(tmp_path / "run", capacity=4)
    info = json.loads((run_dir / "run.json").read_text())
    info["parameters"] = {"knee_memory_pressure_pct": 70.0}
    (run_dir / "run.json").write_text(json.dumps(info))
    analysis = analyze_run(run_dir)
    assert analysis.knee.params["memory_pressure_pct"] == 70.0
    base = next(r for r in analysis.recommendations.items if r.key == "base_capacity")
    assert isinstance(base.reason, BaseCapacityFact), base.reason
    assert base.reason.memory_pressure_pct == 70.0  # the number judged, and the words say it
    words = reason_text(base)
    assert "70 %" in words and "85" not in words, words


def _literal_threshold_defaults(path: Path, names: set[str]) -> list[str]:
    """Where ``path`` gives one of the knee's thresholds (by its field name, or that name upper
    case as a constant) a number of its own: a parameter default, a field, a constant."""

    def number(node: ast.expr | None) -> bool:
        return (
            isinstance(node, ast.Constant)
            and isinstance(node.value, int | float)
            and not isinstance(node.value, bool)
        )

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            positional = [*a.posonlyargs, *a.args]
            pairs = [
                *zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True),
                *zip(a.kwonlyargs, a.kw_defaults, strict=True),
            ]
            found += [f"{node.lineno} {x.arg}" for x, d in pairs if x.arg in names and number(d)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if node.target.id.lower() in names and number(node.value):
                found.append(f"{node.lineno} {node.target.id}")
        elif isinstance(node, ast.Assign) and number(node.value):
            found += [
                f"{node.lineno} {t.id}"
                for t in node.targets
                if isinstance(t, ast.Name) and t.id.lower() in names
            ]
    return found


def test_no_knee_threshold_has_a_second_default() -> None:
    """The fit's flat gain, the rate knee's tail ratio, the simulator's predicted knee: each takes
    the knee's default (:data:`loadknee_core.knee_params.DEFAULTS`), never a number of its own."""
    names = {f.name for f in fields(KneeParams)}
    copies = {
        f"{path.relative_to(REPO)}:{where}"
        for package in ("loadknee_core", "analysis", "loadknee_locust")
        for path in sorted((REPO / package).rglob("*.py"))
        if path not in THRESHOLD_HOMES
        for where in _literal_threshold_defaults(path, names)
    }
    assert copies == set(), copies


def test_the_record_table_needs_the_window_of_the_knee_interval_target(tmp_path: Path) -> None:
    """``window_needed_s`` is the window for the knee's ±``target_interval_pct``: half the
    target, four times the window (1/√T), wherever the stage was wider than either."""
    run_dir = write_run_dir(tmp_path / "run")
    default = analyze_run(run_dir).summary
    halved = analyze_run(run_dir, knee_params=KneeParams(target_interval_pct=2.5)).summary
    target = KneeParams().target_interval_pct
    wide = default["output_tok_s_hw_pct"] > target
    assert wide.sum() >= 3
    assert list(halved["window_needed_s"][wide]) == pytest.approx(
        list(4 * default["window_needed_s"][wide])
    )
