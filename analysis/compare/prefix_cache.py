"""``compare --kind prefix-cache``: what the cache bought, with its intervals, as facts.

The first run is the one without (cache off, or unique prefixes), the later ones with. Per run:

* **hit rate**: the server's prefix-cache hits over its queries (tokens) summed over the step
  stages (:mod:`analysis.stages.prefix_cache`; counter deltas over each measured window), with the
  per-stage range; None when the server exposes no prefix-cache counters;
* **knee**: the knee's users and max concurrency, with the knee's own confidence (the share of
  resampled windows that give the same max concurrency, :mod:`analysis.knee.confidence`);
* **peak output tok/s** with its batch-means interval (the record table's);
* **TTFT P95** at one level both runs tested (the highest at or below both runs' max
  concurrency, so neither is queueing; else the lowest common level), with an interval from
  resampling the stage's time windows (:func:`loadknee_core.confidence.tail_interval`).

The TTFT change's interval is the widest the two intervals allow: from the low end of the
second over the high end of the first to the high end over the low end (conservative; no
pairing is assumed between two separate runs). The sentence is
:func:`analysis.report.compare_words.prefix_change_text`'s.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from analysis.compare.kind import RunSide
from analysis.stages.levels import level_rows
from analysis.stages.summary import measured_requests, stage_windows
from loadknee_core.confidence import tail_interval
from loadknee_core.numeric import num


@dataclass(frozen=True)
class CacheSide:
    label: str
    hit_pct: float | None
    hit_pct_stage_range: tuple[float, float] | None  # lowest and highest step-stage hit %
    knee_users: int | None
    max_concurrency: int | None
    knee_confidence_pct: float | None
    peak_tok_s: float | None
    peak_tok_s_interval: tuple[float, float] | None
    ttft_p95_ms: float | None  # at the comparison's ttft_level
    ttft_p95_interval: tuple[float, float] | None


@dataclass(frozen=True)
class PrefixCacheChange:
    a: CacheSide  # without (the first run)
    b: CacheSide  # with
    ttft_level: int | None
    hit_pct_change: float | None  # points
    ttft_p95_change_pct: float | None
    ttft_p95_change_pct_interval: tuple[float, float] | None
    peak_tok_s_ratio: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _hit(side: RunSide) -> tuple[float | None, tuple[float, float] | None]:
    steps = level_rows(side.summary)
    if "prefix_cache_queries" not in steps:
        return None, None
    q = pd.to_numeric(steps["prefix_cache_queries"], errors="coerce")
    h = pd.to_numeric(steps["prefix_cache_hits"], errors="coerce")
    pct = pd.to_numeric(steps["prefix_cache_hit_pct"], errors="coerce").dropna()
    total_q = float(q.sum(min_count=1))
    if math.isnan(total_q) or total_q <= 0:
        return None, None
    hit = float(h.sum(min_count=1)) / total_q * 100.0
    return hit, ((float(pct.min()), float(pct.max())) if len(pct) else None)


def _peak(side: RunSide) -> tuple[float | None, tuple[float, float] | None]:
    steps = level_rows(side.summary)
    if "output_tok_s" not in steps:
        return None, None
    values = pd.to_numeric(steps["output_tok_s"], errors="coerce")
    if values.isna().all():
        return None, None
    pos = int(values.fillna(float("-inf")).to_numpy().argmax())

    def at(column: str) -> float | None:
        return num(steps[column].iloc[pos]) if column in steps else None

    low, high = at("output_tok_s_low"), at("output_tok_s_high")
    band = (low, high) if low is not None and high is not None else None
    return float(values.max()), band


def ttft_level(a: RunSide, b: RunSide) -> int | None:
    """The level both runs tested, highest at or below both max concurrencies (else lowest)."""
    levels = sorted(
        set(level_rows(a.summary)["target_users"].dropna().astype(int))
        & set(level_rows(b.summary)["target_users"].dropna().astype(int))
    )
    if not levels:
        return None
    caps = [m for m in (a.knee.max_concurrency, b.knee.max_concurrency) if m is not None]
    below = [u for u in levels if not caps or u <= min(caps)]
    return below[-1] if below else levels[0]


def _ttft(side: RunSide, level: int | None) -> tuple[float | None, tuple[float, float] | None]:
    if level is None:
        return None, None
    steps = level_rows(side.summary)
    match = steps[steps["target_users"] == level]
    if match.empty:
        return None, None
    row = match.iloc[0]
    point = num(row.get("ttft_p95_ms"))
    if point is None or side.run is None:
        return point, None
    run = side.run
    windows = stage_windows(run, measured_requests(run))
    stage = int(row["stage"])
    if stage not in windows.index:
        return point, None
    rows = measured_requests(run)
    rows = rows[(rows["stage"] == stage) & (rows["cls"] == "ok")].dropna(subset=["ttft_ms"])
    ends = [float(v) for v in rows["end_unix_s"]]
    if not ends:
        return point, None
    end = max(float(num(windows.at[stage, "window_end"]) or 0.0), *ends)
    band = tail_interval(
        ends, [float(v) for v in rows["ttft_ms"]], min(ends), end,
        starts_s=[float(v) for v in rows["start_unix_s"]], q=0.95, resamples=400,
    )  # fmt: skip
    if band is None:
        return point, None
    return point, (min(band.low, point), max(band.high, point))


def _side(side: RunSide, level: int | None) -> CacheSide:
    hit, hit_range = _hit(side)
    peak, peak_band = _peak(side)
    ttft, ttft_band = _ttft(side, level)
    return CacheSide(
        label=side.label,
        hit_pct=hit,
        hit_pct_stage_range=hit_range,
        knee_users=side.knee.knee_users,
        max_concurrency=side.knee.max_concurrency,
        knee_confidence_pct=side.knee.confidence_pct,
        peak_tok_s=peak,
        peak_tok_s_interval=peak_band,
        ttft_p95_ms=ttft,
        ttft_p95_interval=ttft_band,
    )


def prefix_cache_change(a: RunSide, b: RunSide) -> PrefixCacheChange:
    """The change from ``a`` (without) to ``b`` (with the prefix cache)."""
    level = ttft_level(a, b)
    sa, sb = _side(a, level), _side(b, level)
    change_pct = band = None
    if sa.ttft_p95_ms and sb.ttft_p95_ms is not None:
        change_pct = (sb.ttft_p95_ms / sa.ttft_p95_ms - 1.0) * 100.0
        if sa.ttft_p95_interval and sb.ttft_p95_interval and sa.ttft_p95_interval[0] > 0:
            lo = (sb.ttft_p95_interval[0] / sa.ttft_p95_interval[1] - 1.0) * 100.0
            hi = (sb.ttft_p95_interval[1] / sa.ttft_p95_interval[0] - 1.0) * 100.0
            band = (lo, hi)
    ratio = sb.peak_tok_s / sa.peak_tok_s if sa.peak_tok_s and sb.peak_tok_s is not None else None
    hit_change = (
        sb.hit_pct - sa.hit_pct if sa.hit_pct is not None and sb.hit_pct is not None else None
    )
    return PrefixCacheChange(sa, sb, level, hit_change, change_pct, band, ratio)
