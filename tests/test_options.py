"""The --llm-* options come from the command line, LOADKNEE_* variables, locust.conf and
[tool.locust], through Locust's own parser (checked in a subprocess: importing locust patches
the interpreter with gevent)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).parent / "programs" / "options_probe.py"


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
        "llm_stage_requests": 7,
        "llm_input_tokens": 99,  # locust.conf
        "llm_output_tokens": 33,  # LOADKNEE_OUTPUT_TOKENS
        "llm_seed": 5,  # the command line
    }
