"""Write an :class:`~analysis.importers.model.ImportedRun` as a loadknee run directory.

Stages are the concurrency levels in increasing order, one stage each. Where the lowest level is
1 it becomes the baseline stage (``kind=baseline``, its rows ``phase=baseline``): that is what a
single-user level is for in loadknee's own sweep, and the knee's flattening rule divides by its
rate. Every other level is a ``step`` stage whose rows are ``phase=measure``. Each stage's window
runs from its first request's start to its last request's end, so rates divide by the time the
level actually ran (no warm-up is discarded: the source tools already made that choice).

``run.json`` names the source tool, its version and the sha256 of each file read, says how start
times were obtained and which signals cannot be judged without telemetry; no telemetry file is
written (the loader treats them as absent). Only numbers and short error texts are copied:
prompts and generated text never reach the run directory.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from analysis.importers.model import ImportedLevel, ImportedRequest, ImportedRun
from loadknee_core import contract

#: What the analysis cannot judge from another tool's per-request records alone.
NOT_JUDGED: tuple[str, ...] = (
    "memory pressure: no GPU telemetry (gpu.csv) and no server KV-cache gauge",
    "the server queue (running / waiting requests, preemptions): no server metrics",
    "client-bound stages: the source tool's own CPU was not sampled",
)


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in blocks so a large export costs little memory."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _cell(value: float | int | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return repr(float(value)) if isinstance(value, float) else str(value)


def _itl_summary(req: ImportedRequest) -> tuple[float | None, ...]:
    gaps = [g for g in (req.itl_ms or ()) if g is not None]
    if not gaps:
        return (req.itl_mean_ms, None, None, None)
    ordered = sorted(gaps)
    p95 = statistics.quantiles(ordered, n=20, method="inclusive")[18] if len(gaps) > 1 else gaps[0]
    return (statistics.fmean(gaps), statistics.median(ordered), p95, ordered[-1])


def _tpot(req: ImportedRequest) -> float | None:
    n = req.completion_tokens
    if req.e2e_ms is None or req.ttft_ms is None or n is None or n <= 1:
        return None
    return (req.e2e_ms - req.ttft_ms) / (n - 1)


def request_row(
    run: ImportedRun, stage: int, phase: str, index: int, req: ImportedRequest
) -> dict[str, str]:
    """One ``requests.csv`` row (every contract column; unknown cells empty)."""
    itl_mean, itl_p50, itl_p95, itl_max = _itl_summary(req)
    usage = run.usage_source if req.completion_tokens is not None else "none"
    values: dict[str, Any] = {
        "request_id": f"import-{stage}-{index}",
        "stage": stage,
        "phase": phase,
        "worker": "import",
        "user_id": "",
        "endpoint": run.endpoint,
        "stream": "" if run.stream is None else int(run.stream),
        "batch_size": 1,
        "start_unix_s": req.start_unix_s,
        "end_unix_s": req.end_unix_s,
        "e2e_ms": req.e2e_ms,
        "ttft_ms": req.ttft_ms,
        "tpot_ms": _tpot(req),
        "itl_mean_ms": itl_mean,
        "itl_p50_ms": itl_p50,
        "itl_p95_ms": itl_p95,
        "itl_max_ms": itl_max,
        "chunks": req.chunks,
        "prompt_tokens": req.prompt_tokens,
        "completion_tokens": req.completion_tokens,
        "usage_source": usage,
        "target_input_tokens": None,
        "target_output_tokens": None,
        "length_ok": None,
        "outcome": req.outcome,
        "http_status": req.http_status,
        "error": " ".join(req.error.split())[:200],
        "prompt_hash": "",
    }
    return {k: v if isinstance(v, str) else _cell(v) for k, v in values.items()}


def ordered_levels(levels: Iterable[ImportedLevel]) -> list[ImportedLevel]:
    """Levels by concurrency; two levels at the same concurrency are an error (which to keep?)."""
    by_c: dict[int, ImportedLevel] = {}
    for level in levels:
        if level.concurrency in by_c:
            raise ValueError(
                f"two results at concurrency {level.concurrency}: {by_c[level.concurrency].source}"
                f" and {level.source}; import them separately"
            )
        by_c[level.concurrency] = level
    return [by_c[c] for c in sorted(by_c)]


def _span(level: ImportedLevel) -> tuple[float | None, float | None]:
    starts = [r.start_unix_s for r in level.requests if r.start_unix_s is not None]
    ends = [r.end_unix_s for r in level.requests if r.end_unix_s is not None]
    return (min(starts) if starts else None, max(ends) if ends else None)


def run_info(run: ImportedRun, run_id: str, levels: list[ImportedLevel]) -> dict[str, Any]:
    """The ``run.json`` object of an imported run."""
    return {
        "run_id": run_id,
        "imported": True,
        "source": {
            "tool": run.tool,
            "version": run.tool_version,
            "files": [{"name": p.name, "sha256": sha256_file(p)} for p in run.files],
            "start_times": run.start_times,
            "usage_source": run.usage_source,
            "notes": list(run.notes),
            "dropped": list(run.dropped),
        },
        "not_judged": list(NOT_JUDGED),
        "target_url": run.target_url,
        "model": run.model,
        "endpoint": run.endpoint,
        "stream": run.stream,
        "levels": [lv.concurrency for lv in levels],
        "baseline": bool(levels) and levels[0].concurrency == 1,
        "workers": 0,
    }


def write_run_dir(run: ImportedRun, out: Path) -> Path:
    """Write ``out`` (created; existing contract files are replaced) and return it."""
    levels = ordered_levels(run.levels)
    if not levels:
        raise ValueError(f"no complete level to import from {', '.join(map(str, run.files))}")
    out.mkdir(parents=True, exist_ok=True)
    info = run_info(run, out.name, levels)
    (out / contract.RUN_JSON).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    with (
        (out / contract.STAGES_CSV).open("w", newline="", encoding="utf-8") as sf,
        (out / contract.REQUESTS_CSV).open("w", newline="", encoding="utf-8") as rf,
    ):
        stages = csv.DictWriter(sf, fieldnames=contract.STAGE_COLUMNS)
        requests = csv.DictWriter(rf, fieldnames=contract.REQUEST_COLUMNS)
        stages.writeheader()
        requests.writeheader()
        for stage, level in enumerate(levels):
            baseline = stage == 0 and info["baseline"]
            start, end = _span(level)
            stages.writerow(
                {
                    "stage": stage,
                    "kind": "baseline" if baseline else "step",
                    "target_users": level.concurrency,
                    "batch_size": 1,
                    "start_unix_s": _cell(start),
                    "warmup_end_unix_s": _cell(start),
                    "measure_end_unix_s": _cell(end),
                    "end_unix_s": _cell(end),
                    "stop_reason": "request_count",
                }
            )
            phase = "baseline" if baseline else "measure"
            for i, req in enumerate(level.requests):
                requests.writerow(request_row(run, stage, phase, i, req))
    return out
