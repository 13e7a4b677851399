"""The one answer to deploy: the concurrency to configure and the rule that bound it.

The analysis produces several capacity figures (``max_concurrency``, base capacity, the
production watermark) that answer different questions; a reader needs one number first. The
answer is the users of the last stage before the first stage that breaks any limit:

* **knee** — throughput flattened while the tail departed (the stage before the knee);
* **SLA** — the tail above ``--sla-ms`` (so the answer never breaks the SLA, even where the knee
  lies higher: ``max_concurrency`` alone ignores the SLA);
* **memory** — memory above the pressure threshold (``--knee-memory-pct``, 85 % by default; at
  the threshold exactly the base capacity still counts the stage, and so does this answer);
* **errors** — any failed request (the red line included).

When no stage breaks a limit but a stage's tail departed from the single-user one (a server with
no hard limit, whose latency grows steadily with the batch), the answer is interactive by
default: the stage before the first departed tail (the source method's rule: the highest level
whose P95 has not clearly left the baseline), said as "no hard knee up to N users: latency grows
steadily, the tail doubles at ~M", with the highest tested stage as the offline-batch figure.
A soft knee (the curve flattened and the tail grew, but nothing queued: neither the server's
gauge nor the client-side queue) is not a hard limit either: its answer is the same interactive
one, never above the first departed tail. An answer that lands on a stage whose tail already
departed says so. When no stage breaks a
limit at all, the answer is the highest judged stage and the bound is the tested range itself:
the server was not saturated, and the sweep should go higher. When the very first
stage breaks one, there is no answer (None) and the text says to test lower. A stage that was
not judged ("insufficient data") counts for none of this: it is neither an answer nor the top.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, overload

import numpy as np
import pandas as pd

from analysis.advice.facts import DeployAnswer, DeployBound, DeployFact, KneeWhyFact
from analysis.knee.refusal_signal import REFUSALS
from analysis.model import KneeResult, Signal, StageVerdict
from loadknee_core.knee_params import KneeParams

if TYPE_CHECKING:
    from analysis.advice.facts import DeployWhy


def _broken(verdict: StageVerdict) -> list[DeployBound]:
    """The limits this stage breaks; the order (knee, SLA, errors, memory) breaks ties at one
    stage (their words: :data:`analysis.report.advice_words.BOUND_WORDS`)."""
    fired = {s.name for s in verdict.signals if s.fired}
    out: list[DeployBound] = []
    if verdict.verdict == "knee":
        out.append("knee")
    if "sla" in fired:
        out.append("sla")
    if REFUSALS in fired:  # turned away at once: the server's own limit, not a breakdown
        out.append("refusals")
    elif fired & {"errors", "error_rate", "oom"}:
        out.append("errors")
    pressure = next((s for s in verdict.signals if s.name == "memory_pressure"), None)
    if (
        pressure
        and pressure.value is not None
        and pressure.threshold is not None
        and memory_broken(pressure.value, pressure.threshold)
    ):
        out.append("memory")
    return out


@overload
def memory_broken(pct: float, threshold: float) -> bool: ...
@overload
def memory_broken(pct: np.ndarray, threshold: float) -> np.ndarray: ...
def memory_broken(pct: float | np.ndarray, threshold: float) -> bool | np.ndarray:
    """Whether memory ``pct`` breaks the deploy answer's memory limit (its peak against
    ``--knee-memory-pct``): strictly above, since the base capacity allows memory at the
    threshold, and so does this answer. One rule for a measured stage and for the what-if
    model's predicted KV use per level (:mod:`analysis.predict.batching`), element-wise."""
    return pct > threshold


#: the signals that make a knee a hard limit: requests waited for a slot (the server's own gauge
#: or the client-side queue); a knee without them is latency growing with the batch
QUEUE_SIGNALS = frozenset({"server_saturated", "client_saturated"})


def _tail_departed(verdict: StageVerdict) -> bool:
    return any(s.name == "tail_departure" and s.fired for s in verdict.signals)


def _tail(verdict: StageVerdict) -> Signal:
    return next(s for s in verdict.signals if s.name == "tail_departure")


def _tail_note(previous: StageVerdict, users: int) -> Signal | None:
    """The answer's stage's tail signal, when the answer lands on a stage whose tail has
    already departed."""
    if previous.target_users != users or not _tail_departed(previous):
        return None
    return _tail(previous)


def _why(bound: str, verdict: StageVerdict) -> DeployWhy:
    sig = {s.name: s for s in verdict.signals}
    if bound in ("sla", "memory") or (bound == "errors" and "errors" in sig):
        name = {"sla": "sla", "memory": "memory_pressure", "errors": "errors"}[bound]
        return sig[name]
    if bound == "refusals":
        return sig[REFUSALS]
    if bound == "knee":
        return _knee_why({name for name, s in sig.items() if s.fired})
    return verdict.reasons[0] if verdict.reasons else None


def _knee_why(fired: set[str]) -> KneeWhyFact:
    """Why the knee stage is the knee: the signals that made it one."""
    if "server_saturated" in fired:
        queue: Literal["server", "client", "none"] = "server"
    elif "client_saturated" in fired:
        queue = "client"
    else:
        return KneeWhyFact("none", curve=True)
    both = "throughput_flattening" in fired and "tail_departure" in fired
    return KneeWhyFact(queue, curve=both)


def deploy_answer(summary: pd.DataFrame, knee: KneeResult) -> DeployAnswer:
    """The concurrency to configure, the limit that bound it and why (pure)."""
    del summary  # the verdicts carry every figure the answer needs
    # a stage not judged (no usable rows, or rows that disagree with stages.csv) is never the
    # answer, nor "the tested range": it was not measured (analysis.advice.standing)
    stages = sorted(knee.judged, key=lambda v: (v.target_users, v.stage))
    if not stages:
        return DeployAnswer(None, "none", DeployFact("no_stage"))
    previous: StageVerdict | None = None
    departed: StageVerdict | None = None  # the first trusted stage whose tail departed
    interactive: StageVerdict | None = None  # the stage before it
    for verdict in stages:
        if not verdict.trusted:
            continue  # the load generator was the limit there: it says nothing of the server
        broken = _broken(verdict)
        if broken:
            bound = broken[0]
            why = _why(bound, verdict)
            at = verdict.target_users
            if previous is None:
                fact = DeployFact("none_safe", at_users=at, bounds=tuple(broken), why=why)
                return DeployAnswer(None, bound, fact)
            users, cap_users, slots = previous.target_users, None, None
            cap = knee.max_concurrency
            if cap is not None and cap < users and (bound == "knee" or knee.server_slots):
                # the knee's answer is lower than the stage before: the server's own slot count
                # (or a refined level) bounds it, and the deployable number never exceeds it
                users = cap_users = cap
                if knee.server_slots is not None and knee.server_slots <= previous.target_users:
                    slots = knee.server_slots
            departed_users, departed_tail, batch = None, None, None
            if bound == "knee" and departed is not None and departed.target_users < users:
                fired = {s.name for s in verdict.signals if s.fired}
                if not fired & QUEUE_SIGNALS:  # a soft knee: nothing queued, latency just grew
                    batch, users = users, (interactive or departed).target_users
                    departed_users, departed_tail = departed.target_users, _tail(departed)
            fact = DeployFact(
                "configure",
                users=users,
                at_users=at,
                bounds=tuple(broken),
                why=why,
                cap_users=cap_users,
                server_slots=slots,
                departed_users=departed_users,
                departed_tail=departed_tail,
                batch_users=batch,
                tail_note=_tail_note(previous, users),
            )
            return DeployAnswer(users, bound, fact)
        if departed is None and _tail_departed(verdict):
            departed, interactive = verdict, previous
        previous = verdict
    top = stages[-1].target_users
    if departed is not None:
        kind: Literal["no_hard_knee", "no_hard_knee_low"] = (
            "no_hard_knee_low" if interactive is None else "no_hard_knee"
        )
        users_or_none = None if interactive is None else interactive.target_users
        fact = DeployFact(
            kind,
            users=users_or_none,
            top_users=top,
            departed_users=departed.target_users,
            departed_tail=_tail(departed),
        )
        return DeployAnswer(users_or_none, "tail", fact)
    return DeployAnswer(
        previous.target_users if previous else None,
        "tested_range",
        DeployFact("tested_range", top_users=top),
    )


def memory_pressure_pct(knee: KneeResult) -> float:
    """The memory % the knee was judged to be under pressure at (``--knee-memory-pct``)."""
    return float(knee.params.get("memory_pressure_pct", KneeParams().memory_pressure_pct))


def binding_stage(knee: KneeResult, bound: DeployBound) -> StageVerdict | None:
    """The stage whose figures bound the answer: the first trusted stage breaking a limit
    (knee, SLA, memory, errors), or for ``tail`` the first whose tail departed; None for the
    tested range (nothing bound it) or when no stage was measured."""
    stages = sorted((v for v in knee.stages if v.trusted), key=lambda v: (v.target_users, v.stage))
    if bound == "tail":
        return next((v for v in stages if _tail_departed(v)), None)
    return next((v for v in stages if _broken(v)), None)
