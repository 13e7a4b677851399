"""The --llm-* options come from the command line, LOADKNEE_* variables, locust.conf and
[tool.locust], through Locust's own parser (checked in a subprocess: importing locust patches
the interpreter with gevent)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import PROGRAMS

PROBE = PROGRAMS / "options_probe.py"
TABLE_PROBE = PROGRAMS / "options_table_probe.py"


def test_options_from_every_source(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.locust]\nllm-levels = "2,3"\nllm-stage-requests = 7\n'
    )
    (tmp_path / "locust.conf").write_text("llm-input-tokens = 99\n")
    env = {**os.environ, "LOADKNEE_OUTPUT_TOKENS": "33"}
    out = subprocess.run(
        [sys.executable, str(PROBE)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=60, check=True,
    ).stdout  # fmt: skip
    assert json.loads(out.strip().splitlines()[-1]) == {
        "llm_levels": "2,3",  # [tool.locust] in pyproject.toml
        "llm_stage_requests": "7",  # a number or "auto"
        "llm_input_tokens": 99,  # locust.conf
        "llm_output_tokens": 33,  # LOADKNEE_OUTPUT_TOKENS
        "llm_seed": 5,  # the command line
    }


def test_an_empty_command_line_gives_the_declared_defaults(tmp_path: Path) -> None:
    """Locust's own parser (configargparse) with the generated options: no command line, no
    config file, no LOADKNEE_* variable → exactly ``LlmOptions()``; flags arrive typed; the
    object of an Environment follows in-place edits (web UI) and is reused otherwise."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOADKNEE_")}
    out = subprocess.run(
        [sys.executable, str(TABLE_PROBE)], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    got = json.loads(out.strip().splitlines()[-1])
    assert got["defaults"] is True
    assert got["given"] == [7.0, False, "none", 90.0]  # --run-time folded into the time limit
    assert got["kept"] is True
    assert got["edited"] == ["1,2", "4", 30.0]


def test_every_field_is_an_option_with_a_flag_help_and_env_var() -> None:
    import configargparse

    from loadknee_locust.plugin.options import LlmOptions, add_arguments, option_specs

    parser = configargparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    actions = {a.dest: a for a in parser._actions}
    names = [f.name for f in dataclasses.fields(LlmOptions)]
    assert [s.name for s in option_specs()] == names
    for spec in option_specs():
        action = actions[spec.dest]  # KeyError: a field without an option
        assert action.option_strings == [spec.flag] and spec.flag == "--llm-" + spec.name.replace(
            "_", "-"
        )
        assert len(action.help or "") > 15, spec.name
        assert spec.env_var == "LOADKNEE_" + spec.name.upper()
        assert action.default == getattr(LlmOptions(), spec.name)
        if isinstance(spec.default, bool):
            assert action.nargs == 0, spec.name  # a store_true flag
    assert actions["llm_endpoint"].choices == ["chat", "completions"]
    assert actions["llm_gpu"].choices == ["auto", "nvml", "dcgm", "none"]
    assert {a.title for a in parser._action_groups} >= {
        "loadknee: target and requests",
        "loadknee: prompts",
        "loadknee: stepped shape",
        "loadknee: run directory and telemetry",
    }
    text = " ".join(parser.format_help().split())
    assert "(default 1,2,4,8,16,24,32,48,64;" in text and "%(default" not in text


def test_from_parsed_converts_and_fills_gaps() -> None:
    from types import SimpleNamespace

    from loadknee_locust.plugin.options import LlmOptions

    assert LlmOptions.from_parsed(None) == LlmOptions()
    got = LlmOptions.from_parsed(
        SimpleNamespace(llm_batch_size="4", llm_no_calibrate="true", llm_model=None, run_time=0)
    )
    assert (got.batch_size, got.no_calibrate, got.model) == (4, True, LlmOptions().model)
    assert got.time_limit == LlmOptions().time_limit  # run_time 0: no limit
