"""Import GuideLLM's benchmarks JSON (``guidellm run --output kind=json``): one stage per streams.

Expected: the object GuideLLM writes (``metadata.guidellm_version``, ``benchmarks``: one entry per
sub-benchmark). Each benchmark of a ``concurrent`` profile (``config.strategy.streams``) becomes
one level; other strategies (rate-based, sweep) have no fixed concurrency and are skipped with a
note. Per request (``requests.successful`` / ``errored`` / ``incomplete``) GuideLLM records the
start and end times (``request_start_time`` / ``request_end_time``, unix s, taken by its client
around the HTTP request), TTFT and the mean inter-token latency (not each gap: ``itl_p50`` and
the other per-request ITL columns stay empty), the number of token iterations (as ``chunks``) and
the prompt and output token counts — the server's ``usage`` when the config prefers response
metrics, its own tokenizer otherwise (``usage_source`` says which). Errored requests become
``http_error`` when their message carries an HTTP status, ``stream_error`` otherwise; incomplete
(cancelled) ones ``incomplete``. A cut file keeps its whole benchmarks; a benchmark cut in the
middle is dropped whole (its statistics would lean on the requests that finished first).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.importers.jsonread import keys_text, read_json_object
from analysis.importers.model import (
    Gathered,
    ImportedLevel,
    ImportedRequest,
    ImportedRun,
    ImportFormatError,
)
from loadknee_core.numeric import json_number

EXPECTED = "a GuideLLM benchmarks JSON (guidellm run --output kind=json)"


def _request(rec: dict[str, Any], status: str) -> ImportedRequest:
    info = rec.get("info") or {}
    timings = info.get("timings") or {}
    start = json_number(rec.get("request_start_time"))
    end = json_number(rec.get("request_end_time"))
    latency = json_number(rec.get("request_latency"))
    error = str(info.get("error") or "")
    outcome, http_status = "ok", None
    if status == "errored":
        outcome, http_status = ImportedRequest.failure(error)
    elif status == "incomplete":
        outcome = "incomplete"
    iterations = timings.get("token_iterations")
    return ImportedRequest(
        start_unix_s=start,
        end_unix_s=end,
        e2e_ms=latency * 1000.0 if latency is not None else None,
        ttft_ms=json_number(rec.get("time_to_first_token_ms")),
        itl_mean_ms=json_number(rec.get("inter_token_latency_ms")),
        chunks=int(iterations) if isinstance(iterations, int) else None,
        prompt_tokens=json_number(rec.get("prompt_tokens")),
        completion_tokens=json_number(rec.get("output_tokens")),
        outcome=outcome,
        http_status=http_status,
        error=error or ("" if outcome == "ok" else status),
    )


def _level(path: Path, index: int, bench: dict[str, Any]) -> ImportedLevel | None:
    strategy = (bench.get("config") or {}).get("strategy") or {}
    streams = strategy.get("streams")
    if strategy.get("type_") != "concurrent" or not isinstance(streams, int):
        return None
    groups = bench.get("requests") or {}
    requests = [
        _request(rec, status)
        for status in ("successful", "errored", "incomplete")
        for rec in groups.get(status) or ()
        if isinstance(rec, dict)
    ]
    return ImportedLevel(streams, tuple(requests), f"{path.name} benchmarks[{index}]")


def read_guidellm(paths: list[Path]) -> ImportedRun:
    """Read one or more GuideLLM benchmarks files into an :class:`ImportedRun`."""
    got = Gathered()
    backend: dict[str, Any] = {}
    prefer_usage = True
    for path in paths:
        read = read_json_object(path, EXPECTED)
        data = read.data
        meta = data.get("metadata")
        benches = data.get("benchmarks")
        if not isinstance(meta, dict) or "guidellm_version" not in meta:
            raise ImportFormatError(path, EXPECTED, f"a JSON object with keys {keys_text(data)}")
        if not isinstance(benches, list):
            raise ImportFormatError(path, EXPECTED, "no 'benchmarks' list")
        got.versions.add(str(meta["guidellm_version"]))
        whole = [b for b in benches if isinstance(b, dict)]
        if read.cut is not None:
            if read.cut_member == "benchmarks":
                got.dropped.append(
                    f"{path.name}: the file is cut inside benchmark {len(whole) + 1}; "
                    f"kept the {len(whole)} whole benchmark(s), dropped the cut one"
                )
            else:
                got.dropped.append(f"{path.name}: {read.cut}; kept the whole benchmarks before it")
        for index, bench in enumerate(whole):
            level = _level(path, index, bench)
            if level is None:
                kind = ((bench.get("config") or {}).get("strategy") or {}).get("type_")
                got.notes.append(
                    f"{path.name} benchmarks[{index}]: skipped a {kind!r} benchmark "
                    "(no fixed concurrency)"
                )
                continue
            got.levels.append(level)
            config = bench.get("config") or {}
            backend = config.get("backend") or backend
            prefer_usage = bool(config.get("prefer_response_metrics", prefer_usage))
    fmt = str(backend.get("request_format") or "")
    return got.run(
        "guidellm",
        paths,
        endpoint="chat" if "chat" in fmt else ("completions" if fmt else ""),
        stream=bool(backend.get("stream", True)),
        model=str(backend.get("model") or ""),
        target_url=str(backend.get("target") or ""),
        usage_source="server" if prefer_usage else "estimate",
        start_times="recorded per request by GuideLLM's client (request_start_time)",
    )
