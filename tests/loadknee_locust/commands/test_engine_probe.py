"""The engine, detected once at pre-flight from the API itself (commands/engine_probe).

Through the real HTTP path: the simulator (which answers ``/v1/models`` as vLLM does, ``owned_by:
"vllm"``) with its ``/metrics`` shown and hidden; a loopback server shaped like llama-server
(``owned_by: "llamacpp"``, ``Server: llama.cpp``, ``/props`` with ``total_slots``, fields as a
real llama-server 0.3.36 answered them); and an API that names no engine (a gateway). Then
``run.json``'s ``server`` object as ``loadknee run`` writes it, and the advice's flag names from
it for a run directory with no ``server_metrics.csv``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import pandas as pd
import pytest

from analysis.advice.engine import CAPS, detect_engine
from loadknee_locust.commands import engine_probe
from loadknee_locust.commands.preflight import Target, preflight_server
from loadknee_locust.commands.run import _count_preflight
from loadknee_locust.record.rundir import write_run_json
from tests.support.loopback_http import QuietHandler, loopback_server

LLAMA_MODELS = {"object": "list", "data": [{"id": "tiny", "object": "model", "owned_by": "llamacpp",
                "meta": {"n_ctx_train": 2048, "n_params": 98583552}}]}  # fmt: skip
LLAMA_PROPS = {"default_generation_settings": {"n_ctx": 512}, "total_slots": 8,
               "model_path": "/private/model.gguf", "endpoint_metrics": False}  # fmt: skip
GATEWAY_MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "openai"}]}


@contextmanager
def api(models: dict, *, server_header: str = "", props: dict | None = None) -> Iterator[dict]:
    """A loopback OpenAI-style server: ``/v1/models``, ``/props`` (404 without), one streamed
    completion; ``seen`` lists the GET paths asked."""
    seen: dict[str, list[str]] = {"get": []}

    class Handler(QuietHandler):
        def version_string(self) -> str:  # the Server header
            return server_header or "gateway"

        def do_GET(self):
            seen["get"].append(self.path)
            if self.path == "/v1/models":
                self.send_json(200, models)
            elif self.path == "/props" and props is not None:
                self.send_json(200, props)
            else:
                self.send_json(404, {"error": "not found"})

        def do_POST(self):
            self.stream_deltas({"content": "hi"})

    with loopback_server(Handler) as url:
        yield {"url": url, **seen}


def _target(url: str, tmp_path) -> Target:
    return Target(url, "", "chat", True, "", "", str(tmp_path))


@pytest.mark.parametrize("metrics", [True, False], ids=["metrics", "hidden"])
def test_the_simulator_answers_as_vllm_with_or_without_its_metrics(sim_server, tmp_path, metrics):
    sim = sim_server(metrics=metrics)
    model, server, probes = preflight_server(_target(sim.url, tmp_path))
    assert model == "sim-llm"
    assert server == {"engine": "vllm", "detected_from": ["v1/models owned_by"]}
    assert probes == 0  # vLLM named: no /props asked


def test_llama_server_is_named_by_its_cards_header_and_props(tmp_path):
    with api(LLAMA_MODELS, server_header="llama.cpp", props=LLAMA_PROPS) as srv:
        _, server, probes = preflight_server(_target(srv["url"], tmp_path))
        asked = srv["get"]
    assert server == {
        "engine": "llama.cpp",
        "detected_from": ["v1/models owned_by", "server header", "/props"],
        "slots": 8,
    }
    assert probes == 1 and asked == ["/v1/models", "/props"]
    assert "model_path" not in json.dumps(server)  # the file path is never kept


def test_the_server_header_alone_names_llama_server(tmp_path):
    cards = {"data": [{"id": "tiny", "object": "model"}]}  # an older llama-server: no owned_by
    with api(cards, server_header="llama.cpp") as srv:  # and /props refused
        _, server, probes = preflight_server(_target(srv["url"], tmp_path))
    assert server == {"engine": "llama.cpp", "detected_from": ["server header"]}
    assert probes == 1


def test_a_gateway_that_names_no_engine_is_unknown(tmp_path):
    with api(GATEWAY_MODELS) as srv:
        _, server, probes = preflight_server(_target(srv["url"], tmp_path))
        asked = srv["get"]
    assert server == {} and probes == 1 and asked == ["/v1/models", "/props"]


def test_answers_that_disagree_name_no_engine():
    vllm_cards = {"data": [{"id": "m", "owned_by": "vllm"}]}
    assert engine_probe.server_info(vllm_cards, {"Server": "llama.cpp"}) == {}
    mixed = {"data": [{"id": "a", "owned_by": "vllm"}, {"id": "b", "owned_by": "sglang"}]}
    assert engine_probe.from_models(mixed) is None
    assert engine_probe.from_models({"data": [{"id": "m", "owned_by": "sglang"}]}) == "sglang"
    assert engine_probe.from_props({"total_slots": 8}) is None  # not llama.cpp's shape


def test_run_json_records_it_and_the_advice_spells_llamas_flag(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_run_json(str(run_dir), {"run_id": "run", "prompt_source": {"setup_requests": {}}})
    with api(LLAMA_MODELS, server_header="llama.cpp", props=LLAMA_PROPS) as srv:
        _, server, probes = preflight_server(_target(srv["url"], tmp_path))
    _count_preflight(str(run_dir), server, probes)
    info = json.loads((run_dir / "run.json").read_text())
    assert info["server"]["engine"] == "llama.cpp" and info["server"]["slots"] == 8
    assert info["prompt_source"]["setup_requests"]["preflight_engine_probe"] == 1
    # no server_metrics.csv: the engine still comes from run.json, and with it llama's flag
    engine = detect_engine(pd.DataFrame(), info)
    assert engine == "llama.cpp" and CAPS[engine].flag == "--parallel"
    assert detect_engine(pd.DataFrame(), {"run_id": "x"}) is None
