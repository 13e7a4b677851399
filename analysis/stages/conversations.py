"""Multi-turn runs: latency by turn index, and the conversations a stage change or failure cut.

``requests.csv`` rows of a conversation carry ``conversation_id`` and ``turn`` (0 first; see
:mod:`loadknee_locust.client.conversation`). :func:`by_turn` gives, per turn index, the served
measured rows' TTFT and e2e percentiles and their mean prompt length (it grows with the history);
:func:`conversation_counts` how many conversations were seen, finished all their turns, or were
cut (a failed or cancelled turn, or the run's end, before the last). Runs without conversations
give empty results.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import pandas as pd

#: columns of :func:`by_turn`
TURN_COLUMNS: Final[tuple[str, ...]] = (
    "turn",
    "requests",
    "prompt_tokens_mean",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "e2e_p50_ms",
    "e2e_p95_ms",
)
MEASURED: Final = ("measure", "baseline")


def _conversation_rows(requests: pd.DataFrame) -> pd.DataFrame:
    if "conversation_id" not in requests or "turn" not in requests:
        return requests.iloc[0:0]
    ids = requests["conversation_id"].astype("string").fillna("")
    return requests[(ids != "") & requests["turn"].notna()]


def by_turn(requests: pd.DataFrame) -> pd.DataFrame:
    """Per turn index: served measured rows, mean prompt tokens, TTFT and e2e P50/P95 (ms)."""
    rows = _conversation_rows(requests)
    rows = rows[(rows["outcome"] == "ok") & rows["phase"].isin(MEASURED)]
    if rows.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in TURN_COLUMNS})
    groups = rows.assign(turn=rows["turn"].astype(int)).groupby("turn")
    out = pd.DataFrame(
        {
            "requests": groups.size(),
            "prompt_tokens_mean": groups["prompt_tokens"].mean(),
            "ttft_p50_ms": groups["ttft_ms"].quantile(0.5),
            "ttft_p95_ms": groups["ttft_ms"].quantile(0.95),
            "e2e_p50_ms": groups["e2e_ms"].quantile(0.5),
            "e2e_p95_ms": groups["e2e_ms"].quantile(0.95),
        }
    )
    return out.reset_index()[list(TURN_COLUMNS)]


def conversation_counts(requests: pd.DataFrame, turns: int | None) -> dict[str, int]:
    """Conversations seen, completed (every one of ``turns`` answered) and cut short."""
    rows = _conversation_rows(requests)
    if rows.empty:
        return {"conversations": 0, "completed": 0, "cut": 0}
    answered = rows[rows["outcome"].isin(("ok", "length_mismatch"))]
    per = answered.groupby("conversation_id")["turn"].nunique()
    seen = int(rows["conversation_id"].nunique())
    done = int((per >= turns).sum()) if turns else 0
    return {"conversations": seen, "completed": done, "cut": seen - done}


def planned_turns(run_info: Mapping[str, Any]) -> int | None:
    """Turns per conversation the run asked for (``--llm-turns``, in run.json's parameters)."""
    params = run_info.get("parameters")
    value = params.get("llm_turns") if isinstance(params, Mapping) else None
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
