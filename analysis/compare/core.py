"""Compare two or more analysed runs: a side-by-side table per concurrency and what it means.

The comparisons, each read the way the method reads it (docs/method.md):

``benchmark-vs-replay``
    calibrate the engine with the fixed-length benchmark, then replay the production
    log; the gap between them (users before the knee, P99, tok/s) is the buffer to keep for
    long-tail prompts, and the replay's number is the one to promise.
``config``
    before vs after a change (write max_concurrency into the config, then re-run the
    sweep): did the knee move, and is the stage the first run recommended still comfortable?
``replicas``
    replica efficiency = X_N / (N × X_1) on the peak throughput; 2 replicas giving
    only 1.3× (efficiency 0.65) means a shared bottleneck (network, storage, a lock).
``batch``
    batch size vs concurrency at the same prompts in flight (users × batch size):
    batching fills the GPU with lower per-request latency; concurrency meets the queue sooner.
``prefix-cache``
    prefix caching on vs off (or a shared system prompt vs none): throughput and TTFT.

``auto`` picks the kind from run.json (:mod:`analysis.compare.kind`: prompt source, replicas, batch,
shared prefix; else ``config``). Pure: takes :class:`RunSide` objects, returns a ``Comparison``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from analysis.compare.kind import (
    KINDS,
    RunSide,
    batch_size,
    detect_kind,
    is_replay,
    lookup,
    replica_count,
)
from analysis.compare.prefix_cache import prefix_cache_change
from analysis.model import VERDICT_LABELS
from analysis.report.table import fmt_magnitude
from analysis.stages.levels import level_rows
from loadknee_core.numeric import is_missing, num

__all__ = ["KINDS", "Comparison", "RunSide", "batch_size", "compare_runs", "detect_kind", "lookup"]

#: below this replica efficiency a shared bottleneck is named (1.3× from 2 = 0.65)
SHARED_BOTTLENECK_EFFICIENCY = 0.8

#: per run and concurrency: (long-table column, summary column)
METRICS: tuple[tuple[str, str], ...] = (
    ("e2e_p50_ms", "e2e_p50_ms"),
    ("e2e_p99_ms", "e2e_p99_ms"),
    ("ttft_p50_ms", "ttft_p50_ms"),
    ("output_tok_s", "output_tok_s"),
    ("mem_pct", "gpu_mem_peak_pct"),
    ("kv_pct", "kv_cache_peak_pct"),
    ("success_pct", "success_pct"),
)
LONG_COLUMNS = (
    "label",
    "target_users",
    "batch_size",
    "in_flight",
    *(m for m, _ in METRICS),
    "verdict",
)


@dataclass(frozen=True)
class Comparison:
    kind: str
    kind_reason: str
    labels: tuple[str, ...]
    table: pd.DataFrame  # long form: LONG_COLUMNS, one row per (run, step stage)
    knees: tuple[tuple[str, int | None, int | None], ...]  # (label, knee users, max concurrency)
    interpretations: tuple[str, ...]


def long_table(sides: Sequence[RunSide]) -> pd.DataFrame:
    rows = []
    for side in sides:
        verdicts = {v.stage: v for v in side.knee.stages}
        for row in level_rows(side.summary).to_dict(orient="records"):
            verdict = verdicts.get(int(row["stage"]))
            batch = int(row.get("batch_size") or 1) if not is_missing(row.get("batch_size")) else 1
            rows.append(
                {
                    "label": side.label,
                    "target_users": int(row["target_users"]),
                    "batch_size": batch,
                    "in_flight": int(row["target_users"]) * batch,
                    **{name: num(row.get(col)) for name, col in METRICS},
                    "verdict": None if verdict is None else VERDICT_LABELS[verdict.verdict],
                }
            )
    return pd.DataFrame(rows, columns=list(LONG_COLUMNS))


def peak_throughput(side: RunSide) -> float | None:
    steps = level_rows(side.summary)
    if "output_tok_s" not in steps:
        return None
    values = pd.to_numeric(steps["output_tok_s"], errors="coerce")
    return None if values.isna().all() else float(values.max())


def _at(table: pd.DataFrame, label: str, users: int, column: str) -> float | None:
    rows = table[(table["label"] == label) & (table["target_users"] == users)]
    return None if rows.empty else num(rows.iloc[0][column])


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b) else a / b


def _common_levels(table: pd.DataFrame, a: str, b: str) -> list[int]:
    levels_a = set(table.loc[table["label"] == a, "target_users"])
    return sorted(levels_a & set(table.loc[table["label"] == b, "target_users"]))


def _x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def _benchmark_vs_replay(sides: Sequence[RunSide], table: pd.DataFrame) -> list[str]:
    flags = [is_replay(s) for s in sides]
    out = []
    if all(flags) or not any(flags):
        out.append("run.json does not tell the replay apart: read as first = benchmark.")
        flags = [False] + [True] * (len(sides) - 1)
    bench = next(s for s, f in zip(sides, flags, strict=True) if not f)
    replays = [s for s, f in zip(sides, flags, strict=True) if f]
    for rep in replays:
        mb, mr = bench.knee.max_concurrency, rep.knee.max_concurrency
        line = (
            f"benchmark '{bench.label}' stays below the knee up to {mb} users, "
            f"replay '{rep.label}' up to {mr}"
        )
        if mb is not None and mr is not None and mr < mb:
            line += (
                f": the long-tail buffer is {mb - mr} users ({100 * (mb - mr) / mb:.0f} % of "
                f"the benchmark's number). Promise the replay's {mr}, not {mb}."
            )
        elif mb is not None and mr is not None:
            line += ": the real prompt mix is no harder than the benchmark here."
        out.append(line)
        common = [u for u in _common_levels(table, bench.label, rep.label) if mr is None or u <= mr]
        if common:
            u = common[-1]
            p99 = _ratio(
                _at(table, rep.label, u, "e2e_p99_ms"), _at(table, bench.label, u, "e2e_p99_ms")
            )
            tok = _ratio(
                _at(table, rep.label, u, "output_tok_s"), _at(table, bench.label, u, "output_tok_s")
            )
            out.append(
                f"at {u} users the replay's P99 is {_x(p99)} and its tok/s {_x(tok)} the "
                "benchmark's: that gap is what long prompts cost."
            )
    return out


def _config(sides: Sequence[RunSide], table: pd.DataFrame) -> list[str]:
    before, out = sides[0], []
    for after in sides[1:]:
        out.append(
            f"knee moved from {before.knee.knee_users} to {after.knee.knee_users} users; "
            f"max concurrency {before.knee.max_concurrency} → {after.knee.max_concurrency}; "
            f"peak tok/s {fmt_magnitude(peak_throughput(before))} → "
            f"{fmt_magnitude(peak_throughput(after))}."
        )
        m = before.knee.max_concurrency
        if m is None:
            continue
        verdict = table[(table["label"] == after.label) & (table["target_users"] == m)]["verdict"]
        if verdict.empty:
            out.append(f"'{after.label}' did not test {m} users: re-run with that level to verify.")
        elif verdict.iloc[0] in ("comfortable", "critical"):
            out.append(
                f"at the recommended {m} users '{after.label}' is {verdict.iloc[0]}: "
                "the table holds after the change."
            )
        else:
            out.append(
                f"at the recommended {m} users '{after.label}' is {verdict.iloc[0]}: the "
                "change broke the table; do not deploy max_concurrency "
                f"{m} without re-tuning."
            )
    return out


def _replicas(sides: Sequence[RunSide]) -> list[str]:
    counted = sorted(((replica_count(s) or 0, s) for s in sides), key=lambda p: p[0])
    if any(n <= 0 for n, _ in counted):
        return ["replica counts unknown: pass --replicas N1,N2,... (or 'replicas' in run.json)"]
    n1, one = counted[0]
    x1 = peak_throughput(one)
    out = []
    for n, side in counted[1:]:
        xn = peak_throughput(side)
        eff = _ratio(xn, None if x1 is None else x1 * n / n1)
        if eff is None or xn is None or x1 is None:
            out.append(f"'{side.label}' ({n} replicas): no throughput to compare.")
            continue
        text = (
            f"{n} replicas vs {n1}: peak {fmt_magnitude(xn)} vs {fmt_magnitude(x1)} tok/s = "
            f"{xn / x1:.2f}× for {n / n1:.0f}× the replicas, efficiency {eff:.2f}"
        )
        if eff < SHARED_BOTTLENECK_EFFICIENCY:
            text += (
                " — a shared bottleneck (node network, storage I/O, a lock) eats the gain: "
                "more replicas are wasted money until it is found."
            )
        else:
            text += " — near-linear: scale out with replicas rather than pushing one pod."
        out.append(text)
    return out


def _batch(sides: Sequence[RunSide], table: pd.DataFrame) -> list[str]:
    out = []
    for side in sides:
        # a stage without a throughput figure (no request ended in its window) is no one's best:
        # sorted, its NaN came last and was picked
        mine = table[(table["label"] == side.label) & table["output_tok_s"].notna()]
        best = mine.sort_values("output_tok_s").tail(1)
        if not best.empty:
            row = best.iloc[0]
            out.append(
                f"'{side.label}' (batch {row['batch_size']}): best "
                f"{fmt_magnitude(row['output_tok_s'])} tok/s at {row['target_users']} users "
                f"({row['in_flight']} prompts in flight), P50 "
                f"{fmt_magnitude(row['e2e_p50_ms'], 0.001)} s."
            )
    shared = set.intersection(
        *(set(table.loc[table["label"] == s.label, "in_flight"]) for s in sides)
    )
    for flight in sorted(shared)[-2:]:
        rows = table[table["in_flight"] == flight]
        parts = ", ".join(
            f"{r.label}: {fmt_magnitude(r.output_tok_s)} tok/s P50 "
            f"{fmt_magnitude(r.e2e_p50_ms, 0.001)} s"
            for r in rows.itertuples()
        )
        out.append(f"at {flight} prompts in flight — {parts}.")
    out.append(
        "offline batch jobs: prefer the larger batch size to fill the GPU; interactive "
        "traffic: raise concurrency and keep it under the knee; change one at a time."
    )
    return out


def _prefix_cache(sides: Sequence[RunSide], table: pd.DataFrame) -> list[str]:
    off, out = sides[0], []
    for on in sides[1:]:
        gain = _ratio(peak_throughput(on), peak_throughput(off))
        text = f"'{on.label}' vs '{off.label}': peak tok/s {_x(gain)}"
        common = _common_levels(table, off.label, on.label)
        if common:
            u = common[len(common) // 2]
            ttft = _ratio(
                _at(table, on.label, u, "ttft_p50_ms"), _at(table, off.label, u, "ttft_p50_ms")
            )
            text += f", TTFT P50 at {u} users {_x(ttft)}"
        text += f"; knee {off.knee.knee_users} → {on.knee.knee_users} users."
        if gain is not None and gain < 1.05:
            text += (
                " Little gain: the prompts share little prefix, or the cache is off "
                "(check the server's prefix-cache hit rate)."
            )
        out.append(text)
        out.append(prefix_cache_change(off, on).sentence)
    return out


def compare_runs(sides: Sequence[RunSide], *, kind: str = "auto") -> Comparison:
    """Side-by-side table, knees and interpretations of two or more runs."""
    if len(sides) < 2:
        raise ValueError("compare needs at least two runs")
    if kind not in KINDS:
        raise ValueError(f"unknown comparison kind {kind!r}; one of {', '.join(KINDS)}")
    reason = "chosen with --kind"
    if kind == "auto":
        kind, reason = detect_kind(sides)
    table = long_table(sides)
    if kind == "benchmark-vs-replay":
        interpretations = _benchmark_vs_replay(sides, table)
    elif kind == "replicas":
        interpretations = _replicas(sides)
    elif kind == "batch":
        interpretations = _batch(sides, table)
    elif kind == "prefix-cache":
        interpretations = _prefix_cache(sides, table)
    else:
        interpretations = _config(sides, table)
    return Comparison(
        kind=kind,
        kind_reason=reason,
        labels=tuple(s.label for s in sides),
        table=table,
        knees=tuple((s.label, s.knee.knee_users, s.knee.max_concurrency) for s in sides),
        interpretations=tuple(interpretations),
    )
