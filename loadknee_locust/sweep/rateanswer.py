"""An open-loop rate run's live judgement: offered vs served, backlog and the rate knee so far.

The analysis judges (``analysis.stages.rate_stages``, run by ``python -m analysis.live.answer``
in a child: the Locust process never imports pandas); its JSON ``rates`` block reaches the web
UI as a :class:`RateAnswer`, with knee.json's field names, so the live view and the report read
the same figures. Pure (no clock, no locust).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RateStageJudgement:
    """One judged rate stage: the analysis's figures over its measured window, and its verdict."""

    stage: int
    rate_rps: float
    offered_rps: float | None
    served_rps: float | None
    served_pct: float | None
    backlog_mean: float | None
    backlog_first: float | None  # requests outstanding over the window's first quarter
    backlog_last: float | None  # ... and over its last quarter
    verdict: str  # follows | past knee
    reasons: str  # the signs of the rate knee in words ("" when it follows)


@dataclass(frozen=True)
class RateAnswer:
    """The rate stages judged so far and the rate knee over them (provisional while running)."""

    stages: tuple[RateStageJudgement, ...]
    knee_stage: int | None
    knee_rate_rps: float | None
    max_rate_rps: float | None  # the highest rate below the knee (all so far when none)
    text: str  # the rate knee in words, as the report says it

    @classmethod
    def from_json(cls, block: Mapping[str, Any]) -> RateAnswer:
        """From the answer's ``rates`` object (ValueError, TypeError or KeyError if malformed)."""
        knee = block.get("knee") or {}
        stages = tuple(
            RateStageJudgement(
                stage=int(s["stage"]),
                rate_rps=float(s["rate_rps"]),
                offered_rps=opt_float(s.get("offered_rps")),
                served_rps=opt_float(s.get("served_rps")),
                served_pct=opt_float(s.get("served_pct")),
                backlog_mean=opt_float(s.get("backlog_mean")),
                backlog_first=opt_float(s.get("backlog_first")),
                backlog_last=opt_float(s.get("backlog_last")),
                verdict=str(s.get("rate_verdict") or ""),
                reasons=str(s.get("rate_reasons") or ""),
            )
            for s in block.get("stages") or ()
        )
        knee_stage = knee.get("knee_stage")
        return cls(
            stages=stages,
            knee_stage=None if knee_stage is None else int(knee_stage),
            knee_rate_rps=opt_float(knee.get("knee_rate_rps")),
            max_rate_rps=opt_float(knee.get("max_rate_rps")),
            text=str(knee.get("text") or ""),
        )


def opt_float(value: Any) -> float | None:
    """A live answer's optional number: None stays None, anything else goes through ``float``
    (so a malformed answer raises, as both ``from_json`` methods promise). Shared with
    :mod:`.refine`'s LiveVerdict, the other reader of ``analysis.live.answer``'s JSON."""
    return None if value is None else float(value)
