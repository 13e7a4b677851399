"""Import ``vllm bench serve --save-result --save-detailed`` JSON: one stage per file's concurrency.

Expected per file: the object vLLM's benchmark writes with ``--save-detailed``: ``max_concurrency``
and per-request lists in the same order — ``start_times``, ``latencies``, ``ttfts`` (s), ``itls``
(a list of gaps per request, s), ``input_lens``, ``output_lens``, ``errors``. A folder (a
``vllm bench sweep`` output folder, or any folder of such files) is searched recursively for
them; other JSON files in it are skipped with a note.

Start times: vLLM stamps ``start_times`` with ``time.perf_counter()``, a monotonic clock whose
zero is arbitrary, and records wall time only as ``date``, a local-time string to the second
written at the end. So the importer keeps each request's exact offsets within its file but
places each file's first request at a synthetic unix time: levels one after another in order of
concurrency with a one-second gap, starting at 0. What that changes: durations, rates and
percentiles are exact; absolute times are not, so the run cannot be lined up with telemetry
captured elsewhere by time (``run.json`` says ``start_times`` is synthetic).

Tokens: ``input_lens`` / ``output_lens`` are the server's ``usage`` counts when it sent them
(vLLM's client reads ``usage`` from the last chunk), else vLLM's tokenizer count; the importer
marks them ``server``. A failed request (non-empty ``errors`` entry) becomes ``http_error`` when
its text carries an HTTP status, ``stream_error`` otherwise. A cut file keeps the requests whose
every list entry survived.
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

EXPECTED = "a vllm bench serve --save-result --save-detailed JSON"
PER_REQUEST = ("start_times", "latencies", "ttfts", "itls", "input_lens", "output_lens", "errors")
GAP_S = 1.0  # between synthetic level windows


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _request(data: dict[str, Any], i: int, shift: float) -> ImportedRequest:
    start, latency = json_number(data["start_times"][i]), json_number(data["latencies"][i])
    error = str(data["errors"][i] or "")
    gaps = data["itls"][i]
    ttft = json_number(data["ttfts"][i])
    outcome, status = "ok", None
    if error:
        outcome, status = ImportedRequest.failure(error)
    ok = outcome == "ok"
    return ImportedRequest(
        start_unix_s=start - shift if start is not None else None,
        end_unix_s=start - shift + latency if start is not None and latency is not None else None,
        e2e_ms=latency * 1000.0 if latency is not None and ok else None,
        ttft_ms=ttft * 1000.0 if ttft is not None and ok else None,
        itl_ms=tuple(float(g) * 1000.0 for g in gaps) if isinstance(gaps, list) and ok else None,
        chunks=len(gaps) + 1 if isinstance(gaps, list) and ok else None,
        prompt_tokens=json_number(data["input_lens"][i]),
        completion_tokens=json_number(data["output_lens"][i]) if ok else None,
        outcome=outcome,
        http_status=status,
        error=error,
    )


def _files(paths: list[Path], notes: list[str]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(path.rglob("*.json"))
            if not inside:
                raise ImportFormatError(path, EXPECTED + " (or a folder of them)", "no JSON file")
            found += inside
        else:
            found.append(path)
    return found


def read_vllm_bench(paths: list[Path]) -> ImportedRun:
    """Read vLLM benchmark result files (or folders of them) into an :class:`ImportedRun`."""
    got = Gathered()
    parsed: list[tuple[Path, dict[str, Any], int]] = []
    for path in _files(paths, got.notes):
        read = read_json_object(path, EXPECTED)
        data = read.data
        missing = [k for k in ("max_concurrency", *PER_REQUEST) if k not in data]
        if missing and read.cut is None:
            if any(p.is_dir() for p in paths) and path not in paths:
                got.notes.append(f"{path.name}: skipped (not a --save-detailed result)")
                continue
            keys = keys_text(data)
            hint = " (saved without --save-detailed?)" if "max_concurrency" in data else ""
            raise ImportFormatError(
                path, EXPECTED, f"an object without {', '.join(missing)}{hint}; its keys: {keys}"
            )
        concurrency = data.get("max_concurrency")
        if not isinstance(concurrency, int):
            raise ImportFormatError(
                path,
                EXPECTED,
                f"max_concurrency {concurrency!r} (a run "
                "without --max-concurrency has no fixed concurrency)",
            )
        if read.cut is not None and "errors" not in data:
            # errors come last: a failed request is the one with no latency
            data["errors"] = [
                "" if (json_number(x) or 0) > 0 else "failed (errors list cut)"
                for x in _list(data.get("latencies"))
            ]
        lists: list[list[Any]] = [_list(data.get(k)) for k in PER_REQUEST]
        n = min(len(v) for v in lists)
        if read.cut is not None:
            total = data.get("completed")
            got.dropped.append(
                f"{path.name}: {read.cut}; kept the {n} request(s) whose every field "
                f"survived" + (f" of {total} completed" if isinstance(total, int) else "")
            )
        data = {**data, **{k: v[:n] for k, v in zip(PER_REQUEST, lists, strict=True)}}
        parsed.append((path, data, n))
    parsed.sort(key=lambda item: item[1]["max_concurrency"])
    clock = 0.0
    endpoint = model = url = ""
    for path, data, n in parsed:
        starts = [s for s in data["start_times"] if json_number(s) is not None]
        first = min(starts) if starts else 0.0
        reqs = tuple(_request(data, i, first - clock) for i in range(n))
        ends = [r.end_unix_s for r in reqs if r.end_unix_s is not None]
        clock = (max(ends) if ends else clock) + GAP_S
        got.levels.append(ImportedLevel(int(data["max_concurrency"]), reqs, path.name))
        got.versions.add(str(data.get("vllm_version") or data.get("version") or "unknown"))
        model = str(data.get("model_id") or model)
        kind = str(data.get("endpoint_type") or data.get("backend") or "")
        endpoint = "chat" if "chat" in kind else ("completions" if kind else endpoint)
        url = str(data.get("base_url") or url)
    return got.run(
        "vllm-bench",
        (p for p, _, _ in parsed),
        endpoint=endpoint,
        stream=True,
        model=model,
        target_url=url,
        usage_source="server",
        start_times="synthetic: vLLM records start_times on a monotonic clock (perf_counter) "
        "with no wall-clock anchor; offsets within a level are exact, levels are laid one "
        "after another (1 s apart) from unix time 0",
    )
