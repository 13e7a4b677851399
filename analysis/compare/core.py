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

from analysis.compare.facts import (
    BatchAtFlight,
    BatchBest,
    ConfigCheck,
    ConfigMove,
    FlightPoint,
    Moved,
    Note,
    PrefixChange,
    PrefixGain,
    Reading,
    ReplayBuffer,
    ReplayGap,
    ReplicaScaling,
)
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
from analysis.stages.levels import level_rows
from loadknee_core.numeric import is_missing, num

__all__ = ["KINDS", "Comparison", "RunSide", "batch_size", "compare_runs", "detect_kind", "lookup"]

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
    kind_chosen: bool  # True: named with --kind; False: detected from run.json (detect_kind)
    labels: tuple[str, ...]
    table: pd.DataFrame  # long form: LONG_COLUMNS, one row per (run, step stage)
    knees: tuple[tuple[str, int | None, int | None], ...]  # (label, knee users, max concurrency)
    #: what the comparison found, as facts (:mod:`analysis.compare.facts`); the words are
    #: :func:`analysis.report.compare_words.reading_lines`
    readings: tuple[Reading, ...]


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


def _benchmark_vs_replay(sides: Sequence[RunSide], table: pd.DataFrame) -> list[Reading]:
    flags = [is_replay(s) for s in sides]
    out: list[Reading] = []
    if all(flags) or not any(flags):
        out.append(Note("replay-unmarked"))
        flags = [False] + [True] * (len(sides) - 1)
    bench = next(s for s, f in zip(sides, flags, strict=True) if not f)
    replays = [s for s, f in zip(sides, flags, strict=True) if f]
    for rep in replays:
        mb, mr = bench.knee.max_concurrency, rep.knee.max_concurrency
        out.append(ReplayBuffer(bench.label, rep.label, mb, mr))
        common = [u for u in _common_levels(table, bench.label, rep.label) if mr is None or u <= mr]
        if common:
            u = common[-1]
            p99 = _ratio(
                _at(table, rep.label, u, "e2e_p99_ms"), _at(table, bench.label, u, "e2e_p99_ms")
            )
            tok = _ratio(
                _at(table, rep.label, u, "output_tok_s"), _at(table, bench.label, u, "output_tok_s")
            )
            out.append(ReplayGap(u, p99, tok))
    return out


def _verdict_at(side: RunSide, users: int) -> tuple[bool, str | None]:
    """Whether ``side`` tested ``users`` and the verdict of its first stage there (as in
    :func:`long_table`)."""
    rows = level_rows(side.summary)
    rows = rows[rows["target_users"] == users]
    if rows.empty:
        return False, None
    verdict = next((v for v in side.knee.stages if v.stage == int(rows.iloc[0]["stage"])), None)
    return True, None if verdict is None else verdict.verdict


def _config(sides: Sequence[RunSide]) -> list[Reading]:
    before = sides[0]
    out: list[Reading] = []
    for after in sides[1:]:
        out.append(
            ConfigMove(
                after.label,
                Moved(before.knee.knee_users, after.knee.knee_users),
                Moved(before.knee.max_concurrency, after.knee.max_concurrency),
                Moved(peak_throughput(before), peak_throughput(after)),
            )
        )
        m = before.knee.max_concurrency
        if m is not None:
            out.append(ConfigCheck(after.label, m, *_verdict_at(after, m)))
    return out


def _replicas(sides: Sequence[RunSide]) -> list[Reading]:
    counted = sorted(((replica_count(s) or 0, s) for s in sides), key=lambda p: p[0])
    if any(n <= 0 for n, _ in counted):
        return [Note("replicas-unknown")]
    n1, one = counted[0]
    x1 = peak_throughput(one)
    out: list[Reading] = []
    for n, side in counted[1:]:
        xn = peak_throughput(side)
        eff = _ratio(xn, None if x1 is None else x1 * n / n1)
        out.append(ReplicaScaling(side.label, n, n1, xn, x1, eff))
    return out


def _batch(sides: Sequence[RunSide], table: pd.DataFrame) -> list[Reading]:
    out: list[Reading] = []
    for side in sides:
        # a stage without a throughput figure (no request ended in its window) is no one's best:
        # sorted, its NaN came last and was picked
        mine = table[(table["label"] == side.label) & table["output_tok_s"].notna()]
        best = mine.sort_values("output_tok_s").tail(1)
        if not best.empty:
            row = best.iloc[0]
            out.append(
                BatchBest(
                    side.label,
                    num(row["output_tok_s"]),
                    num(row["e2e_p50_ms"]),
                    batch_size=int(row["batch_size"]),
                    users=int(row["target_users"]),
                    in_flight=int(row["in_flight"]),
                )
            )
    shared = set.intersection(
        *(set(table.loc[table["label"] == s.label, "in_flight"]) for s in sides)
    )
    for flight in sorted(shared)[-2:]:
        rows = table[table["in_flight"] == flight]
        points = tuple(
            FlightPoint(r.label, num(r.output_tok_s), num(r.e2e_p50_ms)) for r in rows.itertuples()
        )
        out.append(BatchAtFlight(int(flight), points))
    out.append(Note("batch-advice"))
    return out


def _prefix_cache(sides: Sequence[RunSide], table: pd.DataFrame) -> list[Reading]:
    off = sides[0]
    out: list[Reading] = []
    for on in sides[1:]:
        gain = _ratio(peak_throughput(on), peak_throughput(off))
        common = _common_levels(table, off.label, on.label)
        u = ttft = None
        if common:
            u = common[len(common) // 2]
            ttft = _ratio(
                _at(table, on.label, u, "ttft_p50_ms"), _at(table, off.label, u, "ttft_p50_ms")
            )
        out.append(
            PrefixGain(on.label, off.label, gain, u, ttft, off.knee.knee_users, on.knee.knee_users)
        )
        out.append(PrefixChange(prefix_cache_change(off, on)))
    return out


def compare_runs(sides: Sequence[RunSide], *, kind: str = "auto") -> Comparison:
    """Side-by-side table, knees and readings (facts) of two or more runs."""
    if len(sides) < 2:
        raise ValueError("compare needs at least two runs")
    if kind not in KINDS:
        raise ValueError(f"unknown comparison kind {kind!r}; one of {', '.join(KINDS)}")
    chosen = kind != "auto"
    if not chosen:
        kind = detect_kind(sides)
    table = long_table(sides)
    if kind == "benchmark-vs-replay":
        readings = _benchmark_vs_replay(sides, table)
    elif kind == "replicas":
        readings = _replicas(sides)
    elif kind == "batch":
        readings = _batch(sides, table)
    elif kind == "prefix-cache":
        readings = _prefix_cache(sides, table)
    else:
        readings = _config(sides)
    return Comparison(
        kind=kind,
        kind_chosen=chosen,
        labels=tuple(s.label for s in sides),
        table=table,
        knees=tuple((s.label, s.knee.knee_users, s.knee.max_concurrency) for s in sides),
        readings=tuple(readings),
    )
