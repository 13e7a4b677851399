"""Figures the cluster files share, computed once per analysed run instead of once per file.

The KEDA, HPA and alert files, the latency profile, the energy table and the llm-d reports each
ask for the same stage gauges, anchors and measured windows; computed afresh every time they
were most of the time spent writing the cluster files. :func:`per_analysis` keeps one result
per :class:`~analysis.pipeline.Analysis` object while that object lives (an ``Analysis`` is
frozen: what it holds does not change, so neither does a figure computed from it).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import TypeVar

from analysis.pipeline import Analysis

T = TypeVar("T")


def per_analysis(compute: Callable[[Analysis], T]) -> Callable[[Analysis], T]:
    """``compute(analysis)``, remembered for as long as ``analysis`` itself is alive."""
    results: dict[int, T] = {}

    @functools.wraps(compute)
    def once(analysis: Analysis) -> T:
        key = id(analysis)  # an Analysis holds frames, so it is not hashable
        if key not in results:
            results[key] = compute(analysis)
            weakref.finalize(analysis, results.pop, key, None)  # before the id can be reused
        return results[key]

    return once
