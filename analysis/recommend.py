"""Turn the verdicts into deployment settings, each with its reason (filled in below)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from analysis.model import Baseline, KneeResult, Recommendations


def recommend(
    summary: pd.DataFrame,
    knee: KneeResult,
    baseline: Baseline,
    *,
    run_info: dict[str, Any] | None = None,
    params: Any = None,
) -> Recommendations:
    """Settings from the knee: max_concurrency, watermark, timeouts, vLLM flags, replicas."""
    return Recommendations(items=(), server_flags=())


def to_yaml(recs: Recommendations) -> str:
    """A YAML config snippet: flat keys, each preceded by its reason as a comment."""
    return ""
