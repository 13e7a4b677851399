"""The per-process LLM state: one per Environment, rebuilt when the options change (web UI).

Runs in a subprocess because ``loadknee_locust.client.state`` imports locust (gevent patching).
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.paths import PROGRAMS

SCRIPT = PROGRAMS / "state_per_env.py"


def test_state_is_per_environment_and_follows_option_changes() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["same_object"] and out["separate_per_env"]
    assert (out["before"], out["after"]) == (64, 200)
    # the source was rebuilt for 200 tokens (about 200 words at the assumed one a word, not
    # 64), and without a calibration its rows carry no input target to miss
    target, words = out["prompt_after"]
    assert target is None and 190 <= words <= 200, out["prompt_after"]
    assert out["sweep_edit"] == [True, "1,2"]
    assert out["bad_extra"]["kind"] == "error"
    # words are the product: the message a user reads for bad input
    assert "--llm-extra-body must be a JSON object" in out["bad_extra"]["error"]
