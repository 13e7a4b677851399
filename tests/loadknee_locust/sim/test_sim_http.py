"""The simulator over real HTTP on a free port: streaming, non-streaming, usage, errors, log."""

from __future__ import annotations

import asyncio
import json
import statistics
import urllib.error
import urllib.request
from typing import Any

import aiohttp

from loadknee_locust.sim.tokenizer import count_tokens
from tests.support.sim_probe import content_of, prompt_of, stream_request


def post(url: str, path: str, body: Any, headers: dict[str, str] | None = None):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **(headers or {})}
    request = urllib.request.Request(url + path, data=data, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        text = error.read()
        try:
            return error.code, json.loads(text)
        except ValueError:
            return error.code, text


def stream(url: str, body: dict[str, Any], **kwargs: Any):
    async def go():
        async with aiohttp.ClientSession() as session:
            return await stream_request(session, url, body, **kwargs)

    return asyncio.run(go())


CHAT = {"messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "Hello, world!"}]}  # fmt: skip
CHAT_PROMPT_TOKENS = 3 + (3 + 3) + (3 + 4)  # constant + per message + content


def test_streaming_chat_chunks_usage_and_log(sim_server) -> None:
    sim = sim_server()
    body = {**CHAT, "max_tokens": 7, "ignore_eos": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    result = stream(sim.url, body, endpoint="chat", headers={"X-Request-Id": "req-1"})
    assert result.status == 200 and result.done
    first = result.chunks[0]
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = result.content_chunks
    assert len(content) == 7  # one chunk per token
    assert [c["choices"][0]["finish_reason"] for c in content] == [None] * 6 + ["length"]
    last = result.chunks[-1]
    assert last["choices"] == []
    assert last["usage"] == {"prompt_tokens": CHAT_PROMPT_TOKENS, "completion_tokens": 7,
                             "total_tokens": CHAT_PROMPT_TOKENS + 7}  # fmt: skip
    assert count_tokens(result.text) == 7
    (record,) = sim.log()
    assert record["request_id"] == "req-1"
    assert record["outcome"] == "ok" and record["status"] == 200 and record["stream"] is True
    assert (record["prompt_tokens"], record["completion_tokens"]) == (CHAT_PROMPT_TOKENS, 7)
    assert record["arrival_unix_s"] < record["first_token_unix_s"] <= record["end_unix_s"]


def test_streaming_completions_tokens_arrive_one_by_one(sim_server) -> None:
    sim = sim_server(decode_base_ms=20.0)
    result = stream(sim.url, {"prompt": prompt_of(5), "max_tokens": 10, "ignore_eos": True})
    assert result.status == 200 and result.done
    assert result.chunks[0]["object"] == "text_completion"
    assert len(result.content_chunks) == 10 and result.usage is None  # usage not asked for
    gaps = [b - a for a, b in zip(result.chunk_times, result.chunk_times[1:], strict=False)]
    # every token is written when it exists, never all in one burst: the client's read stamps
    # can merge two chunks when a busy machine deschedules the reader (seen at load 11), so the
    # typical gap and the whole span are judged, not the smallest gap
    assert statistics.median(gaps) > 0.010
    assert result.chunk_times[-1] - result.chunk_times[0] > 9 * 0.015


def test_non_streaming_chat_usage(sim_server) -> None:
    sim = sim_server()
    status, body = post(
        sim.url, "/v1/chat/completions", {**CHAT, "max_tokens": 12, "ignore_eos": True}
    )
    assert status == 200
    assert body["object"] == "chat.completion"
    message = body["choices"][0]["message"]
    assert message["role"] == "assistant" and count_tokens(message["content"]) == 12
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"] == {"prompt_tokens": CHAT_PROMPT_TOKENS, "completion_tokens": 12,
                             "total_tokens": CHAT_PROMPT_TOKENS + 12}  # fmt: skip
    (record,) = sim.log()
    assert record["stream"] is False and record["outcome"] == "ok"
    # non-streaming: first token when the engine made it; end when the body went out
    assert record["arrival_unix_s"] < record["first_token_unix_s"] < record["end_unix_s"]


def test_completions_batch_prompt_list(sim_server) -> None:
    sim = sim_server()
    prompts = [prompt_of(3), "Hi, there.", prompt_of(10)]
    status, body = post(sim.url, "/v1/completions",
                        {"prompt": prompts, "max_tokens": 4, "ignore_eos": True})  # fmt: skip
    assert status == 200
    assert [c["index"] for c in body["choices"]] == [0, 1, 2]
    assert all(count_tokens(c["text"]) == 4 for c in body["choices"])
    assert body["usage"]["prompt_tokens"] == 3 + 4 + 10
    assert body["usage"]["completion_tokens"] == 12


def test_streaming_batch_has_every_index(sim_server) -> None:
    sim = sim_server()
    body = {"prompt": [prompt_of(2), prompt_of(2)], "max_tokens": 3, "ignore_eos": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    result = stream(sim.url, body)
    indices = [c["choices"][0]["index"] for c in result.content_chunks]
    assert sorted(indices) == [0, 0, 0, 1, 1, 1]
    assert result.usage == {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10}


def test_too_long_is_400_in_openai_shape(sim_server) -> None:
    sim = sim_server(max_model_len=64)
    status, body = post(sim.url, "/v1/completions", {"prompt": prompt_of(60), "max_tokens": 5})
    assert status == 400
    assert set(body["error"]) == {"message", "type", "param", "code"}
    # words are the product: vLLM's own error message, copied for clients that parse it
    assert "maximum context length is 64" in body["error"]["message"]
    assert sim.log()[0]["outcome"] == "too_long"
    assert post(sim.url, "/v1/completions", {"prompt": prompt_of(59), "max_tokens": 5})[0] == 200


def test_bad_requests(sim_server) -> None:
    sim = sim_server()
    assert post(sim.url, "/v1/chat/completions", b"{not json")[0] == 400
    assert post(sim.url, "/v1/chat/completions", {"messages": []})[0] == 400
    assert post(sim.url, "/v1/completions", {"prompt": "x", "max_tokens": 0})[0] == 400
    assert post(sim.url, "/v1/completions", {"prompt": "x", "model": "other"})[0] == 404
    assert post(sim.url, "/v1/completions",
                {"prompt": "x", "max_tokens": 2, "min_tokens": 3})[0] == 400  # fmt: skip
    assert post(sim.url, "/v1/completions", {"prompt": "x", "n": 2})[0] == 400
    options = {"include_usage": True}
    assert post(sim.url, "/v1/completions", {"prompt": "x", "stream_options": options})[0] == 400
    assert {r["outcome"] for r in sim.log()} == {"bad_request"}


def test_eos_is_seeded_and_min_tokens_holds(sim_server) -> None:
    sim = sim_server(eos_mean_tokens=8.0, decode_base_ms=2.0)
    lengths = []
    for _ in range(12):
        _, body = post(sim.url, "/v1/completions", {"prompt": "x", "max_tokens": 40})
        lengths.append(body["usage"]["completion_tokens"])
    assert len(set(lengths)) > 3 and min(lengths) < 40  # lengths vary
    again = sim_server(eos_mean_tokens=8.0, decode_base_ms=2.0)
    assert lengths == [post(again.url, "/v1/completions", {"prompt": "x", "max_tokens": 40})[1]
                       ["usage"]["completion_tokens"] for _ in range(12)]  # fmt: skip
    for _ in range(5):
        _, body = post(
            sim.url, "/v1/completions", {"prompt": "x", "max_tokens": 40, "min_tokens": 30}
        )
        assert body["usage"]["completion_tokens"] >= 30


def test_models_health_and_control_off(sim_server) -> None:
    sim = sim_server(model="my-model", allow_control=False)
    assert post(sim.url, "/sim/crash", {})[0] == 404
    models = json.loads(sim.get("/v1/models"))
    assert [m["id"] for m in models["data"]] == ["my-model"]
    assert sim.get("/health") == b""
    status, _ = post(
        sim.url, "/v1/completions", {"prompt": "x", "max_tokens": 1, "model": "my-model"}
    )
    assert status == 200
    assert content_of({"choices": [{"text": "a"}]}) == "a"


def test_no_metrics_hides_the_servers_counters(sim_server) -> None:
    """``--no-metrics``: /metrics answers 404, as a gateway in front of the engine does."""
    hidden = sim_server(metrics=False)
    assert hidden.get_status("/metrics") == 404
    assert post(hidden.url, "/v1/completions", {"prompt": "x", "max_tokens": 2})[0] == 200
    shown = sim_server()
    assert shown.get_status("/metrics") == 200
