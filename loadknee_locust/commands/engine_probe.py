"""Which engine serves the target, from what the pre-flight already reads (stdlib only).

The analysis spells each flag the engine's way (``analysis/advice/engine.py``: vLLM
``--max-num-seqs``, SGLang ``--max-running-requests``, llama.cpp ``--parallel``). The metric
names say which engine it is, but a server without ``/metrics`` (llama-server without
``--metrics``, a gateway) has none; its API still answers. Checked against each engine's
own source and, for llama.cpp, against a running llama-server (built from llama-cpp-python 0.3.36):

* ``GET /v1/models``: each model card's ``owned_by`` — vLLM ``"vllm"`` (``ModelCard`` in
  ``vllm/entrypoints/openai/protocol.py``), SGLang ``"sglang"`` (``sglang/srt/.../protocol.py``),
  llama.cpp ``"llamacpp"``. Other values (``"openai"``, an organisation, a gateway's own) say
  nothing and are not read as an engine.
* the response's ``Server`` header: llama-server sends ``Server: llama.cpp``; vLLM and SGLang
  both answer ``uvicorn``, which tells them apart from nothing, so it is not used.
* ``GET /props`` (llama.cpp only, asked once when the two above point at llama.cpp or say
  nothing): ``total_slots`` is the ``--parallel`` the server runs with, and
  ``default_generation_settings`` marks the answer as llama.cpp's. Its other fields (the
  model's file path, the chat template) are never kept.

:func:`server_info` returns what ``run.json``'s ``server`` object records: ``engine`` (a key of
``analysis.advice.engine.CAPS``, or absent), ``detected_from`` (which of the above said so)
and ``slots`` (llama.cpp's ``total_slots``, when read).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: ``owned_by`` values an engine uses for itself → engine
OWNED_BY: dict[str, str] = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp"}
#: ``Server`` header values → engine
SERVER_HEADERS: dict[str, str] = {"llama.cpp": "llama.cpp"}


def from_models(payload: object) -> str | None:
    """The engine a ``/v1/models`` answer names in its cards' ``owned_by`` (None: none)."""
    data = payload.get("data") if isinstance(payload, Mapping) else None
    if not isinstance(data, list):
        return None
    owners = {str(card.get("owned_by", "")).lower() for card in data if isinstance(card, Mapping)}
    found = {OWNED_BY[o] for o in owners if o in OWNED_BY}
    return found.pop() if len(found) == 1 else None


def from_headers(headers: Mapping[str, str] | None) -> str | None:
    """The engine a response's ``Server`` header names (None: none or an unknown one)."""
    if not headers:
        return None
    value = next((v for k, v in headers.items() if k.lower() == "server"), "")
    return SERVER_HEADERS.get(value.strip().lower())


def from_props(payload: object) -> int | None:
    """llama.cpp's ``total_slots`` from a ``/props`` answer (None: not llama.cpp's shape)."""
    if not isinstance(payload, Mapping) or "default_generation_settings" not in payload:
        return None
    slots = payload.get("total_slots")
    return slots if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0 else None


def wants_props(engine: str | None) -> bool:
    """Whether ``/props`` is worth one GET: llama.cpp (its slot count) or nothing known yet."""
    return engine in (None, "llama.cpp")


def server_info(
    models: object, headers: Mapping[str, str] | None, props: object = None
) -> dict[str, Any]:
    """``run.json``'s ``server`` object from the pre-flight's answers (see the module doc)."""
    said = {"v1/models owned_by": from_models(models), "server header": from_headers(headers)}
    slots = from_props(props)
    if slots is not None:
        said["/props"] = "llama.cpp"
    engines = {e for e in said.values() if e}
    info: dict[str, Any] = {}
    if len(engines) == 1:
        info["engine"] = engines.pop()
        info["detected_from"] = [source for source, e in said.items() if e]
    if slots is not None and info.get("engine") == "llama.cpp":
        info["slots"] = slots
    return info
