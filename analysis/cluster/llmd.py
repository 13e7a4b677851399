"""llm-d's benchmark report v0.2: one report per stage out, and reports back in as a record table.

The format (llm-d-benchmark's ``benchmark_report_v0_2``, the rows llm-d's planner and its
converters from GuideLLM / inference-perf / vllm bench read) has three top-level fields —
``version: "0.2"``, ``run`` (ids and ISO-8601 times) and ``results`` (required), plus
``scenario`` (the stack and the load) — and every object forbids fields it does not name. A
statistic is ``{units, mean, p50, p95, p99, …}`` with units from a closed list (``count``,
``ms``, ``ms/token``, ``token/s``, ``qps``, ``Watts``, …). What loadknee writes per stage:

================================================  ==============================================
BR v0.2 field                                     loadknee figure (record table column)
================================================  ==============================================
``scenario.load.standardized.concurrency``        ``target_users``
``scenario.load.standardized.stage``              ``stage``
``…input_seq_len`` / ``output_seq_len``           prompt / completion tokens (``fixed`` when every
                                                  request had the same length)
``results…requests.total`` / ``failures``         ``requests`` / ``errors``
``…latency.request_latency`` (ms)                 ``e2e_mean_ms``, ``e2e_p50/p95/p99_ms``
``…latency.time_to_first_token`` (ms)             ``ttft_p50/p95/p99_ms`` (mean from the rows)
``…latency.inter_token_latency`` (ms/token)       ``itl_p50_ms``, ``itl_p95_ms`` (loadknee's: the
                                                  median / P95 over requests of each request's)
``…latency.time_per_output_token`` (ms/token)     ``tpot_p50_ms``, ``tpot_p95_ms``
``…throughput.output_token_rate`` (token/s)       ``output_tok_s``
``…throughput.total_token_rate`` / ``requests``   ``total_tok_s`` / ``qps``
``run.time.duration``                             ``window_s`` (the measured window)
================================================  ==============================================

Written as YAML (:mod:`.yamlblock`), file names ``stage_<n>_benchmark_report_v0_2.yaml`` like
inference-perf's. :func:`read_reports` reads such files (YAML needs PyYAML; JSON does not) back
into a summary frame with the same columns — everything else NaN, never 0 — and
:func:`record_table` judges it like any record table (the knee from the summary alone).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import loadknee_core
from analysis.cluster.engines import detect_engine
from analysis.cluster.plan import report_name, report_stages
from analysis.cluster.stages import answer, measured_windows
from analysis.cluster.yamlblock import dump
from analysis.knee.find import find_knee
from analysis.model import SUMMARY_COLUMNS, KneeResult
from analysis.pipeline import Analysis
from analysis.report.answer_view import answer_note
from analysis.report.knee_summary import summary_words
from analysis.report.table import record_frame
from analysis.stages.baseline import compute_baseline
from loadknee_core.numeric import lenient_num

VERSION = "0.2"
#: statistic key → summary column, per latency field
LATENCY_FIELDS: dict[str, tuple[str, dict[str, str]]] = {
    "request_latency": (
        "ms",
        {"mean": "e2e_mean_ms", "p50": "e2e_p50_ms", "p95": "e2e_p95_ms", "p99": "e2e_p99_ms"},
    ),
    "time_to_first_token": (
        "ms",
        {"p50": "ttft_p50_ms", "p95": "ttft_p95_ms", "p99": "ttft_p99_ms"},
    ),
    "inter_token_latency": ("ms/token", {"p50": "itl_p50_ms", "p95": "itl_p95_ms"}),
    "time_per_output_token": ("ms/token", {"p50": "tpot_p50_ms", "p95": "tpot_p95_ms"}),
}
THROUGHPUT_FIELDS: dict[str, tuple[str, str]] = {
    "output_token_rate": ("token/s", "output_tok_s"),
    "total_token_rate": ("token/s", "total_tok_s"),
    "requests_rate": ("qps", "qps"),
}


def _stats(values: np.ndarray, units: str) -> dict[str, Any] | None:
    values = values[~np.isnan(values)]
    if not len(values):
        return None
    q = np.percentile(values, [50, 95, 99])
    return {
        "units": units,
        "mean": float(values.mean()),
        "min": float(values.min()),
        "p50": float(q[0]),
        "p95": float(q[1]),
        "p99": float(q[2]),
        "max": float(values.max()),
    }


def _seq_len(values: np.ndarray) -> dict[str, Any] | None:
    values = values[~np.isnan(values)]
    if not len(values):
        return None
    low, high = int(values.min()), int(values.max())
    if low == high:
        return {"distribution": "fixed", "value": low}
    return {
        "distribution": "other",
        "value": float(values.mean()),
        "std_dev": float(values.std()),
        "min": low,
        "max": high,
    }


def _iso(stamp: float | None) -> str | None:
    if stamp is None or math.isnan(stamp):
        return None
    return datetime.fromtimestamp(stamp, UTC).isoformat().replace("+00:00", "Z")


def _duration(seconds: float | None) -> str | None:
    if seconds is None or math.isnan(seconds):
        return None
    return "PT" + f"{seconds:.9f}".rstrip("0").rstrip(".") + "S"


def _drop_none(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _drop_none(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_drop_none(v) for v in node]
    return node


def stage_report(analysis: Analysis, stage: int) -> dict[str, Any]:
    """One stage as a BR v0.2 document (a plain dict; :func:`export_reports` writes it)."""
    summary = analysis.summary.set_index("stage")
    row = summary.loc[stage]
    measured, windows = measured_windows(analysis)
    rows = measured[measured["stage"] == stage]
    ok = rows[rows["cls"] == "ok"]
    start = lenient_num(windows.loc[stage, "window_start"]) if stage in windows.index else None
    end = lenient_num(windows.loc[stage, "window_end"]) if stage in windows.index else None

    def col(name: str) -> np.ndarray:
        return pd.to_numeric(ok[name], errors="coerce").to_numpy(dtype=float)

    latency: dict[str, Any] = {}
    for field, (units, mapping) in LATENCY_FIELDS.items():
        stats = {k: lenient_num(row[c]) for k, c in mapping.items()}
        if field == "time_to_first_token":
            ttft = col("ttft_ms")
            stats["mean"] = float(np.nanmean(ttft)) if np.isfinite(ttft).any() else None
        if field in ("inter_token_latency", "time_per_output_token"):
            source = col("itl_mean_ms" if field == "inter_token_latency" else "tpot_ms")
            stats["mean"] = float(np.nanmean(source)) if np.isfinite(source).any() else None
        if stats.get("mean") is not None:
            latency[field] = {"units": units, **stats}
    throughput = {
        field: {"units": units, "mean": lenient_num(row[c])}
        for field, (units, c) in THROUGHPUT_FIELDS.items()
        if lenient_num(row[c]) is not None
    }
    run_id = analysis.run_id
    users = int(lenient_num(row["target_users"]) or 0)
    kind = str(row["kind"])
    engine = detect_engine(analysis.run.server_metrics)
    config = json.dumps({"run": run_id, "stage": stage, "users": users}, sort_keys=True)
    cfg_id = hashlib.sha256(config.encode()).hexdigest()[:16]
    scenario: dict[str, Any] = {
        "load": {
            "metadata": {
                "schema_version": "0.0.1",
                "cfg_id": cfg_id,
                "description": f"loadknee {kind} stage {stage}: {users} concurrent users, "
                "closed loop (each user sends its next request when the last one ends)",
            },
            "standardized": {
                "tool": "loadknee",
                "tool_version": loadknee_core.__version__,
                "stage": stage,
                "input_seq_len": _seq_len(col("prompt_tokens")),
                "output_seq_len": _seq_len(col("completion_tokens")),
                "concurrency": users,
            },
            "Native": {
                "args": {"loadknee_stage_kind": kind, "batch_size": lenient_num(row["batch_size"])}
            },
        }
    }
    if scenario["load"]["standardized"]["input_seq_len"] is None:
        scenario["load"]["standardized"]["input_seq_len"] = {"distribution": "other", "value": 0}
    if engine is not None:
        scenario["stack"] = [
            {
                "metadata": {
                    "kind": "inference_engine",
                    "label": engine.name,
                    "cfg_id": hashlib.sha256(engine.name.encode()).hexdigest()[:16],
                    "description": f"{engine.label}, named by the metrics it exported",
                },
                "standardized": {"tool": engine.name, "tool_version": "unknown"},
                "Native": {"args": {}},
            }
        ]
    requests = {
        "total": int(lenient_num(row["requests"]) or 0),
        "failures": int(lenient_num(row["errors"]) or 0),
        "input_length": _stats(col("prompt_tokens"), "count"),
        "output_length": _stats(col("completion_tokens"), "count"),
    }
    doc = {
        "version": VERSION,
        "run": {
            "uid": f"{run_id}-stage-{stage}",
            "eid": run_id,
            "time": {
                "start": _iso(start),
                "end": _iso(end),
                "duration": _duration(lenient_num(row["window_s"])),
            },
        },
        "scenario": scenario,
        "results": {
            "request_performance": {
                "aggregate": {"requests": requests, "latency": latency, "throughput": throughput}
            }
        },
    }
    return _drop_none(doc)


def export_reports(analysis: Analysis) -> dict[str, str]:
    """File name → YAML text, one report per stage (baseline included), in stage order."""
    out = {}
    view = answer(analysis)
    for stage in report_stages(analysis):
        doc = stage_report(analysis, stage)
        header = [
            f"llm-d benchmark report v0.2, written by loadknee: run {analysis.run_id}",
            answer_note(view),
        ]
        out[report_name(stage)] = dump(doc, header=header)
    return out


def load_document(path: str | Path) -> dict[str, Any]:
    """One report file: JSON, or YAML through PyYAML (which must then be installed)."""
    text = Path(path).read_text(encoding="utf-8")
    if text.lstrip().startswith("{"):
        data = json.loads(text)
    else:
        try:
            import yaml
        except ImportError as exc:  # not a dependency of the analysis; the test extra has it
            raise ValueError(
                f"{path}: reading YAML reports needs PyYAML (pip install pyyaml)"
            ) from exc
        data = yaml.safe_load(text)
    if not isinstance(data, dict) or str(data.get("version")) != VERSION:
        raise ValueError(f"{path}: not an llm-d benchmark report v{VERSION}")
    return data


def _get(node: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def summary_row(doc: dict[str, Any], index: int) -> dict[str, Any]:
    """One report as a row of the summary frame (:data:`~analysis.model.SUMMARY_COLUMNS`)."""
    row: dict[str, Any] = dict.fromkeys(SUMMARY_COLUMNS, math.nan)
    load = _get(doc, "scenario", "load", "standardized") or {}
    native = _get(doc, "scenario", "load", "Native", "args") or {}
    agg = _get(doc, "results", "request_performance", "aggregate") or {}
    stage = load.get("stage")
    row["stage"] = int(stage) if isinstance(stage, int) else index
    kind = native.get("loadknee_stage_kind")
    row["kind"] = kind if kind in ("baseline", "step") else "step"
    row["target_users"] = load.get("concurrency")
    row["batch_size"] = lenient_num(native.get("batch_size")) or 1
    requests = agg.get("requests") or {}
    total, failures = requests.get("total"), requests.get("failures") or 0
    row["requests"] = total
    row["errors"] = failures
    if total is not None:
        row["ok"] = total - failures
        row["success_pct"] = 100.0 * (total - failures) / total if total else math.nan
    for field, (_units, mapping) in LATENCY_FIELDS.items():
        stats = (agg.get("latency") or {}).get(field) or {}
        for key, column in mapping.items():
            if key in stats:
                row[column] = lenient_num(stats[key])
    for field, (_units, column) in THROUGHPUT_FIELDS.items():
        row[column] = lenient_num(((agg.get("throughput") or {}).get(field) or {}).get("mean"))
    duration = _get(doc, "run", "time", "duration")
    if isinstance(duration, str) and duration.startswith("PT") and duration.endswith("S"):
        row["window_s"] = lenient_num(duration[2:-1])
    return row


def read_reports(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Reports → a summary frame, one row per report, sorted by stage."""
    rows = [summary_row(load_document(p), i) for i, p in enumerate(sorted(map(Path, paths)))]
    frame = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    for column in SUMMARY_COLUMNS:
        if column != "kind":
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame["stage"] = frame["stage"].astype(int)
    return frame.sort_values("stage", ignore_index=True)


def record_table(paths: Iterable[str | Path]) -> tuple[pd.DataFrame, KneeResult]:
    """The record table of imported reports and the knee found on it (summary figures only)."""
    summary = read_reports(paths)
    knee = find_knee(summary, compute_baseline(None, summary))
    return record_frame(summary, knee), knee


def main(argv: list[str] | None = None) -> int:
    """``python -m analysis.cluster.llmd REPORT…``: print the reports' record table and knee."""
    import argparse
    import sys

    from analysis.report.table import format_text

    parser = argparse.ArgumentParser(
        prog="python -m analysis.cluster.llmd",
        description="Read llm-d benchmark reports v0.2 (YAML or JSON, one per stage) and print "
        "their record table and knee.",
    )
    parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT")
    ns = parser.parse_args(argv)
    try:
        record, knee = record_table(ns.reports)
    except (OSError, ValueError) as exc:
        print(f"llmd: {exc}", file=sys.stderr)
        return 2
    print(format_text(record).rstrip("\n"))
    print("knee: " + summary_words(knee))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
