"""Exercise the per-Environment LLM state: identity per environment, rebuilt on option changes.

Run in a child process (``loadknee_locust.client.state`` imports locust, which patches the
interpreter with gevent). Prints one JSON object of observations for the test to judge.
"""

from __future__ import annotations

import json
import types
from typing import Any

from loadknee_locust.client.state import llm_state, prompt_source_info

HOST = "http://127.0.0.1:9"  # never contacted: calibration is off and the model is given


def env(**opts: Any) -> types.SimpleNamespace:
    base = dict(
        llm_input_tokens=64, llm_output_tokens=8, llm_model="m", llm_no_calibrate=True,
        llm_extra_body="",
    )  # fmt: skip
    base.update(opts)
    return types.SimpleNamespace(parsed_options=types.SimpleNamespace(**base), runner=None)


out: dict[str, Any] = {}
e1, e2 = env(), env(llm_input_tokens=99)
s1 = llm_state(e1)
out["same_object"] = llm_state(e1) is s1
out["separate_per_env"] = llm_state(e2) is not s1
s1.prepare(HOST, "chat")
out["before"] = prompt_source_info(e1)["target_input_tokens"]
e1.parsed_options.llm_input_tokens = 200  # what a web-UI edit does
s1.prepare(HOST, "chat")
out["after"] = prompt_source_info(e1)["target_input_tokens"]
assert s1.source is not None
prompt = s1.source.next_prompt("chat")  # uncalibrated: no row target, the guessed words
out["prompt_after"] = [prompt.target_input_tokens, len((prompt.text or "").split())]
source = s1.source
e1.parsed_options.llm_levels = "1,2"  # a sweep option: the prompts still hold
s1.prepare(HOST, "chat")
out["sweep_edit"] = [s1.source is source, s1.options.levels]
e1.parsed_options.llm_extra_body = "[1]"
s1.prepare(HOST, "chat")
out["bad_extra"] = prompt_source_info(e1)
print(json.dumps(out))
