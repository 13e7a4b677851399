"""Per-request latency metrics from raw ``perf_counter`` stamps: e2e, TTFT, ITL summary, TPOT.

Pure on purpose (no clock reads): the user class stamps the start, each content-bearing chunk and
the end; this module derives every metric from those stamps, in milliseconds. A metric whose
inputs are missing is None, never 0:

* ``ttft_ms``: start → first content-bearing chunk (None without one, or when not streaming);
* ``itl_*_ms``: gaps between consecutive content-bearing chunks — mean, P50, P95 (linear
  interpolation between order statistics, numpy's default) and max (None with fewer than two);
* ``tpot_ms`` = (e2e − TTFT) / (tokens per sequence − 1), tokens per sequence being the
  completion tokens divided by the number of sequences in the request (batch mode); None when
  TTFT is unknown or a sequence has fewer than two tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise


@dataclass(frozen=True, slots=True)
class RequestTiming:
    """Latency metrics of one request, in milliseconds (None = not measurable)."""

    e2e_ms: float
    ttft_ms: float | None
    tpot_ms: float | None
    itl_mean_ms: float | None
    itl_p50_ms: float | None
    itl_p95_ms: float | None
    itl_max_ms: float | None


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0–100) of already sorted values, numpy's "linear" method."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def request_timing(
    start: float,
    end: float,
    content_times: Sequence[float] = (),
    completion_tokens: int | None = None,
    sequences: int = 1,
) -> RequestTiming:
    """Derive every metric from stamps in seconds (``perf_counter``) and the token count."""
    e2e_ms = (end - start) * 1000.0
    if not content_times:
        return RequestTiming(e2e_ms, None, None, None, None, None, None)
    ttft_ms = (content_times[0] - start) * 1000.0
    tpot_ms = None
    if completion_tokens is not None and sequences > 0:
        per_sequence = completion_tokens / sequences
        if per_sequence >= 2:
            tpot_ms = (e2e_ms - ttft_ms) / (per_sequence - 1)
    if len(content_times) < 2:
        return RequestTiming(e2e_ms, ttft_ms, tpot_ms, None, None, None, None)
    gaps = sorted((b - a) * 1000.0 for a, b in pairwise(content_times))
    return RequestTiming(
        e2e_ms=e2e_ms,
        ttft_ms=ttft_ms,
        tpot_ms=tpot_ms,
        itl_mean_ms=sum(gaps) / len(gaps),
        itl_p50_ms=percentile(gaps, 50),
        itl_p95_ms=percentile(gaps, 95),
        itl_max_ms=gaps[-1],
    )
