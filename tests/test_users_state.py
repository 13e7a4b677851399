"""The per-process LLM state: one per Environment, rebuilt when the options change (web UI).

Runs in a subprocess because ``loadknee_locust.client.state`` imports locust (gevent patching).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import json, types
    from loadknee_locust.client.state import llm_state, prompt_source_info

    def env(**opts):
        base = dict(llm_input_tokens=64, llm_output_tokens=8, llm_model="m",
                    llm_no_calibrate=True, llm_extra_body="")
        base.update(opts)
        return types.SimpleNamespace(parsed_options=types.SimpleNamespace(**base), runner=None)

    out = {}
    e1, e2 = env(), env(llm_input_tokens=99)
    s1 = llm_state(e1)
    out["same_object"] = llm_state(e1) is s1
    out["separate_per_env"] = llm_state(e2) is not s1
    s1.prepare("http://127.0.0.1:9", "chat")
    out["before"] = prompt_source_info(e1)["target_input_tokens"]
    e1.parsed_options.llm_input_tokens = 200          # what a web-UI edit does
    s1.prepare("http://127.0.0.1:9", "chat")
    out["after"] = prompt_source_info(e1)["target_input_tokens"]
    out["prompt_after"] = s1.source.next_prompt("chat").target_input_tokens
    source = s1.source
    e1.parsed_options.llm_levels = "1,2"              # a sweep option: prompts still hold
    s1.prepare("http://127.0.0.1:9", "chat")
    out["sweep_edit"] = [s1.source is source, s1.options.levels]
    e1.parsed_options.llm_extra_body = "[1]"
    s1.prepare("http://127.0.0.1:9", "chat")
    out["bad_extra"] = prompt_source_info(e1)
    print(json.dumps(out))
    """
)


def test_state_is_per_environment_and_follows_option_changes() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["same_object"] and out["separate_per_env"]
    assert (out["before"], out["after"], out["prompt_after"]) == (64, 200, 200)
    assert out["sweep_edit"] == [True, "1,2"]
    assert out["bad_extra"]["kind"] == "error"
    assert "--llm-extra-body must be a JSON object" in out["bad_extra"]["error"]
