"""Add the SLO answer to the recommendations: SLO capacity, what binds, interactive cap, replicas.

Why a separate step after :func:`analysis.advice.recommend.recommend`: the knee's settings stay
exactly
as they are without SLOs, and with SLOs the two answers sit side by side:

* ``slo_capacity`` — the highest concurrency meeting every SLO, with the limits used;
* ``binding_constraint`` — ``latency`` (the SLO capacity is at or below max_concurrency) or
  ``throughput`` (the SLOs have headroom at max_concurrency);
* ``interactive_max_concurrency`` — never above the SLO capacity (interactive users are the ones
  the SLOs were written for); offline batch keeps the knee's answer, it is not bound by them;
* ``replicas`` — for ``--target-concurrency``, from the binding one: latency-bound means fewer
  users per replica, so more replicas for the same peak.
"""

from __future__ import annotations

import dataclasses
import math

from analysis.advice.facts import (
    DeployAnswer,
    DeployFact,
    Recommendation,
    Recommendations,
    SloAdviceFact,
)
from analysis.advice.recommend import RecommendParams, watermark_band
from analysis.model import KneeResult
from analysis.slo.evaluate import SloResult


def _replace(items: list[Recommendation], item: Recommendation) -> None:
    for i, old in enumerate(items):
        if old.key == item.key:
            items[i] = item
            return
    items.append(item)


def _per_replica(knee: KneeResult, p: RecommendParams) -> int | None:
    if knee.base_capacity is None:
        return None
    return watermark_band(knee.base_capacity, p)[1]


def with_slo(
    recs: Recommendations,
    slo: SloResult | None,
    knee: KneeResult,
    params: RecommendParams | None = None,
) -> Recommendations:
    """``recs`` with the SLO items added or adjusted (unchanged when no SLO was given)."""
    if slo is None:
        return recs
    p = params or RecommendParams()
    items = list(recs.items)
    cap = slo.capacity
    limits = slo.params
    fact = SloAdviceFact("slo_capacity", slo_limits=limits, capacity=cap, doubt=slo.doubt)
    items.append(Recommendation("slo_capacity", cap, fact))
    why = SloAdviceFact(
        "binding", capacity=cap, binding=slo.binding, max_concurrency=knee.max_concurrency
    )
    items.append(Recommendation("binding_constraint", slo.binding, why))
    current = next((i for i in items if i.key == "interactive_max_concurrency"), None)
    if cap is not None and (current is None or current.value is None or cap < current.value):
        _replace(
            items,
            Recommendation(
                "interactive_max_concurrency",
                cap,
                SloAdviceFact("interactive", slo_limits=limits, capacity=cap),
            ),
        )
    if p.target_concurrency is not None and cap:
        watermark = _per_replica(knee, p)
        per = cap if slo.binding == "latency" or watermark is None else min(cap, watermark)
        efficiency = p.replica_efficiency or 1.0
        count = max(1, math.ceil(p.target_concurrency / (per * efficiency)))
        _replace(
            items,
            Recommendation(
                "replicas",
                count,
                SloAdviceFact(
                    "replicas",
                    binding=slo.binding,
                    target=p.target_concurrency,
                    per_replica=per,
                    from_slo=per == cap,
                    efficiency=efficiency,
                ),
            ),
        )
    deploy = _deploy_within_slo(recs.deploy, slo)
    if deploy is not recs.deploy and deploy is not None:
        _replace(items, Recommendation("deploy_concurrency", deploy.users, deploy.fact))
    return dataclasses.replace(recs, items=tuple(items), deploy=deploy)


def _deploy_within_slo(answer: DeployAnswer | None, slo: SloResult) -> DeployAnswer | None:
    """The answer to deploy never breaks an SLO: above the SLO capacity, the SLOs bind it."""
    cap = slo.capacity
    if answer is None or (answer.users is not None and cap is not None and answer.users <= cap):
        return answer
    if cap is None:
        return DeployAnswer(None, "sla", DeployFact("slo_none", slo_limits=slo.params))
    fact = DeployFact("slo_bound", users=cap, batch_users=answer.users, slo_limits=slo.params)
    return DeployAnswer(cap, "sla", fact)
