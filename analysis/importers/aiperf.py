"""Import NVIDIA AIPerf artifact folders (``aiperf profile --artifact-dir``): one stage per folder.

Expected per folder: ``profile_export.jsonl`` (one JSON record per request: ``metadata`` with
``request_start_ns`` / ``request_end_ns`` in unix nanoseconds and ``benchmark_phase``; ``metrics``
holding ``{"value", "unit"}`` pairs; ``error`` on a failed request) beside
``profile_export_aiperf.json`` (the summary, whose ``input_config`` holds the concurrency, the
endpoint and the tool version). A path may name the folder or either file in it. Warm-up records
(``benchmark_phase`` other than ``profiling``) are left out; cancelled ones become ``incomplete``.
Per request AIPerf keeps every chunk gap (``inter_chunk_latency``), so the ITL percentiles are
exact; token counts come from the server's ``usage`` when the run used
``--use-server-token-count``, else from AIPerf's own tokenizer (``usage_source`` says which).
A cut JSONL keeps its whole lines and names the lines it dropped.
"""

from __future__ import annotations

import json
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

EXPECTED = "an AIPerf artifact folder (profile_export.jsonl + profile_export_aiperf.json)"
RECORDS = "profile_export.jsonl"
SUMMARY = "profile_export_aiperf.json"


def _value(metrics: dict[str, Any], name: str) -> Any:
    entry = metrics.get(name)
    return entry.get("value") if isinstance(entry, dict) else None


def _request(rec: dict[str, Any], use_server: bool) -> ImportedRequest:
    meta = rec.get("metadata") or {}
    metrics = rec.get("metrics") or {}
    start_ns = json_number(meta.get("request_start_ns"))
    end_ns = json_number(meta.get("request_end_ns"))
    gaps = _value(metrics, "inter_chunk_latency")
    error = rec.get("error") if isinstance(rec.get("error"), dict) else None
    outcome, status, message = "ok", None, ""
    if error is not None:
        code = error.get("code")
        status = code if isinstance(code, int) and 100 <= code <= 599 else None
        outcome = "http_error" if status is not None else "stream_error"
        message = str(error.get("message") or error.get("type") or "error")
    elif meta.get("was_cancelled"):
        outcome, message = "cancelled", "cancelled by aiperf"
    prompt = _value(metrics, "usage_prompt_tokens" if use_server else "input_sequence_length")
    output = _value(metrics, "usage_completion_tokens" if use_server else "output_token_count")
    latency = json_number(_value(metrics, "request_latency"))
    if latency is None and start_ns is not None and end_ns is not None:
        latency = (end_ns - start_ns) / 1e6
    return ImportedRequest(
        start_unix_s=start_ns / 1e9 if start_ns is not None else None,
        end_unix_s=end_ns / 1e9 if end_ns is not None else None,
        e2e_ms=latency,
        ttft_ms=json_number(_value(metrics, "time_to_first_token")),
        itl_ms=tuple(float(g) for g in gaps) if isinstance(gaps, list) else None,
        itl_mean_ms=json_number(_value(metrics, "inter_token_latency")),
        chunks=len(gaps) + 1 if isinstance(gaps, list) else None,
        prompt_tokens=json_number(prompt),
        completion_tokens=json_number(output),
        outcome=outcome,
        http_status=status,
        error=message,
    )


def _folder(path: Path) -> Path:
    if path.is_dir():
        return path
    if path.name in (RECORDS, SUMMARY):
        return path.parent
    raise ImportFormatError(path, EXPECTED, f"a file named {path.name!r}")


def _records(path: Path, dropped: list[str]) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise ImportFormatError(path, EXPECTED, "a binary file (not UTF-8 text)") from None
    records, bad = [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            bad.append(number)
            continue
        if not isinstance(rec, dict) or "metadata" not in rec or "metrics" not in rec:
            bad.append(number)
            continue
        records.append(rec)
    if bad and not records:
        raise ImportFormatError(path, EXPECTED, f"no AIPerf record on any of {len(bad)} line(s)")
    if bad:
        shown = ", ".join(map(str, bad[:5])) + (" …" if len(bad) > 5 else "")
        dropped.append(f"{path}: dropped {len(bad)} line(s) that are not whole records ({shown})")
    return records


def _profiling_phase(config: dict[str, Any]) -> dict[str, Any]:
    for phase in config.get("phases") or ():
        if isinstance(phase, dict) and phase.get("kind", phase.get("name")) == "profiling":
            return phase
    return {}


def read_aiperf(paths: list[Path]) -> ImportedRun:
    """Read one artifact folder per concurrency into an :class:`ImportedRun`."""
    got = Gathered()
    files: list[Path] = []
    endpoint: dict[str, Any] = {}
    model = ""
    for given in paths:
        folder = _folder(given)
        summary_path, records_path = folder / SUMMARY, folder / RECORDS
        for need in (summary_path, records_path):
            if not need.is_file():
                raise ImportFormatError(folder, EXPECTED, f"no {need.name} in it")
        summary = read_json_object(summary_path, EXPECTED).data
        config = summary.get("input_config")
        if not isinstance(config, dict):
            found = f"no input_config (keys: {keys_text(summary)})"
            raise ImportFormatError(summary_path, EXPECTED, found)
        phase = _profiling_phase(config)
        concurrency = phase.get("concurrency")
        if not isinstance(concurrency, int):
            raise ImportFormatError(
                summary_path, EXPECTED + " of a --concurrency run", f"profiling phase {phase}"
            )
        got.versions.add(str(summary.get("aiperf_version") or "unknown"))
        endpoint = config.get("endpoint") or {}
        use_server = bool(endpoint.get("use_server_token_count"))
        models = (config.get("models") or {}).get("items") or [{}]
        model = str(models[0].get("name") or "")
        records = _records(records_path, got.dropped)
        kept = [
            _request(rec, use_server)
            for rec in records
            if (rec.get("metadata") or {}).get("benchmark_phase", "profiling") == "profiling"
        ]
        got.levels.append(ImportedLevel(concurrency, tuple(kept), str(folder)))
        files += [records_path, summary_path]
    kind = str(endpoint.get("type") or "")
    urls = endpoint.get("urls") or [""]
    return got.run(
        "aiperf",
        files,
        endpoint="chat" if kind == "chat" else ("completions" if kind == "completions" else ""),
        stream=bool(endpoint.get("streaming")) if endpoint else None,
        model=model,
        target_url=str(urls[0]),
        usage_source="server" if endpoint.get("use_server_token_count") else "estimate",
        start_times="recorded per request by AIPerf (request_start_ns)",
    )
