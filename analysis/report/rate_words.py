"""The open-loop rate stages in words: each stage's signs of the rate knee, and the rate knee.

:mod:`analysis.stages.rate_stages` judges (a :class:`~analysis.stages.rate_stages.RateSignal`
per sign, the :class:`~analysis.stages.rate_stages.RateKnee`); the screen, record.md, record.csv
and knee.json take their words from here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from analysis.stages.rate_stages import RateKnee, RateSignal


def rate_signal_text(signal: RateSignal) -> str:
    """One sign of the rate knee in words."""
    if signal.kind == "not_following":
        return (
            f"served {signal.served_pct or 0.0:.0f} % of the offered rate "
            f"(< {signal.threshold or 0.0:g} %)"
        )
    if signal.kind == "backlog_grew":
        return (
            f"backlog grew from {signal.backlog_first or 0.0:.1f} to "
            f"{signal.backlog_last or 0.0:.1f} requests within the window"
        )
    return f"P95 from the planned send {signal.tail_ratio or 0.0:.1f}x the baseline's"


def rate_reasons_text(reasons: Iterable[RateSignal] | Any) -> str:
    """A stage's ``rate_reasons`` cell in words ("" for none; a str is words already)."""
    if isinstance(reasons, str):
        return reasons
    return "; ".join(rate_signal_text(r) for r in reasons)


def rate_records(table: pd.DataFrame) -> pd.DataFrame:
    """The rate table with its ``rate_reasons`` in words (record.csv, knee.json)."""
    if "rate_reasons" not in table:
        return table
    return table.assign(rate_reasons=[rate_reasons_text(r) for r in table["rate_reasons"]])


def rate_knee_text(knee: RateKnee) -> str:
    """The rate knee, the rate held below it and, with SLOs, the most within them."""
    max_rate, slo_rate = knee.max_rate_rps, knee.slo_max_rate_rps
    if knee.knee_rate_rps is None:
        return (
            f"no rate knee up to {max_rate:g} requests/s: served followed offered at every stage"
            if max_rate is not None
            else "no rate stage to judge"
        )
    first = rate_signal_text(knee.reasons[0]) if knee.reasons else ""
    held = f"; {max_rate:g} requests/s held" if max_rate is not None else ""
    text = (
        f"rate knee at {knee.knee_rate_rps:g} requests/s (stage {knee.knee_stage}: {first}){held}"
    )
    if knee.slo_judged:
        text += (
            f"; max {slo_rate:g} requests/s within the SLOs"
            if slo_rate is not None
            else "; no rate below the knee meets the SLOs"
        )
    return text


def rate_knee_json(knee: RateKnee) -> dict[str, object]:
    """knee.json's ``rate_knee``: the figures, the reasons and the sentence in words."""
    return {
        "knee_stage": knee.knee_stage,
        "knee_rate_rps": knee.knee_rate_rps,
        "max_rate_rps": knee.max_rate_rps,
        "slo_max_rate_rps": knee.slo_max_rate_rps,
        "reasons": [rate_signal_text(r) for r in knee.reasons],
        "text": rate_knee_text(knee),
    }
