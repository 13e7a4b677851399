"""The one answer to deploy: the concurrency to configure and the rule that bound it.

The analysis produces several capacity figures (``max_concurrency``, base capacity, the
production watermark) that answer different questions; a reader needs one number first. The
answer is the users of the last stage before the first stage that breaks any limit:

* **knee** — throughput flattened while the tail departed (the stage before the knee);
* **SLA** — the tail above ``--sla-ms`` (so the answer never breaks the SLA, even where the knee
  lies higher: ``max_concurrency`` alone ignores the SLA);
* **memory** — memory above the pressure threshold (85 %; at 85 % exactly the base capacity
  still counts the stage, and so does this answer);
* **errors** — any failed request (the red line included).

When no stage breaks a limit, the answer is the highest tested stage and the bound is the tested
range itself: the server was not saturated, and the sweep should go higher. When the very first
stage breaks one, there is no answer (None) and the text says to test lower.
"""

from __future__ import annotations

import pandas as pd

from analysis import rules
from analysis.model import DeployAnswer, DeployBound, KneeResult, StageVerdict
from analysis.numeric import counted

#: bound → the words used in "bound by ..."; order breaks ties at one stage
BOUND_WORDS: dict[DeployBound, str] = {
    "knee": "the knee",
    "sla": "the latency SLA",
    "errors": "errors",
    "memory": "memory pressure",
}


def _broken(verdict: StageVerdict) -> list[DeployBound]:
    """The limits this stage breaks, in :data:`BOUND_WORDS` order."""
    fired = {s.name for s in verdict.signals if s.fired}
    out: list[DeployBound] = []
    if verdict.verdict == "knee":
        out.append("knee")
    if "sla" in fired:
        out.append("sla")
    if fired & {"errors", "error_rate", "oom"}:
        out.append("errors")
    pressure = next((s for s in verdict.signals if s.name == "memory_pressure"), None)
    # strictly above: the base capacity allows memory ≤ 85 %, and so does this answer
    if (
        pressure
        and pressure.value is not None
        and pressure.threshold is not None
        and (pressure.value > pressure.threshold)
    ):
        out.append("memory")
    return out


def _why(bound: str, verdict: StageVerdict) -> str:
    sig = {s.name: s for s in verdict.signals}
    if bound in ("sla", "memory") or (bound == "errors" and "errors" in sig):
        name = {"sla": "sla", "memory": "memory_pressure", "errors": "errors"}[bound]
        return sig[name].text
    if bound == "knee":
        return _knee_why({name for name, s in sig.items() if s.fired})
    return "; ".join(verdict.reasons[:1])


def _knee_why(fired: set[str]) -> str:
    """Why the knee stage is the knee, in the words of the signals that made it one."""
    curve = "throughput stopped growing while the tail departed"
    if "server_saturated" not in fired:
        return curve
    queue = "the server queued requests with every slot busy"
    both = "throughput_flattening" in fired and "tail_departure" in fired
    return f"{queue}, and {curve}" if both else queue


def deploy_answer(summary: pd.DataFrame, knee: KneeResult) -> DeployAnswer:
    """The concurrency to configure, the limit that bound it and why, in one line."""
    del summary  # the verdicts carry every figure the answer needs
    stages = sorted(knee.stages, key=lambda v: (v.target_users, v.stage))
    cite = rules.cite("deploy")
    if not stages:
        return DeployAnswer(None, "none", f"no step stage was measured {cite}")
    previous: StageVerdict | None = None
    for verdict in stages:
        if not verdict.trusted:
            continue  # the load generator was the limit there: it says nothing of the server
        broken = _broken(verdict)
        if broken:
            bound = broken[0]
            names = [BOUND_WORDS[b] for b in broken]
            words = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
            why = _why(bound, verdict)
            if previous is None:
                return DeployAnswer(
                    None,
                    bound,
                    "no tested concurrency is safe: already at "
                    f"{counted(verdict.target_users, 'user')} {words} ({why}); test lower "
                    f"concurrency {cite}",
                )
            users, capped = previous.target_users, ""
            cap = knee.max_concurrency
            if cap is not None and cap < users and (bound == "knee" or knee.server_slots):
                # the knee's answer is lower than the stage before: the server's own slot count
                # (or a refined level) bounds it, and the deployable number never exceeds it
                users, capped = cap, f"; max_concurrency {cap} bounds it"
                if knee.server_slots is not None and knee.server_slots <= previous.target_users:
                    capped += f" (the server ran at most {knee.server_slots:g} at once)"
            return DeployAnswer(
                users,
                bound,
                f"configure {users} concurrent requests, bound by {words}: at "
                f"{counted(verdict.target_users, 'user')} {why}{capped} {cite}",
            )
        previous = verdict
    top = stages[-1].target_users
    return DeployAnswer(
        previous.target_users if previous else None,
        "tested_range",
        f"configure {top} concurrent requests, bound only by the tested range: not saturated "
        f"up to {counted(top, 'user')}; sweep higher to find the limit {cite}",
    )


def context_lines(knee: KneeResult, watermark: object | None) -> list[str]:
    """The other capacity figures, each with its one-line definition."""
    lines = [
        f"max_concurrency = {knee.max_concurrency if knee.max_concurrency is not None else '—'}"
        ": the stage before the knee (or the red line); it ignores the SLA and memory "
        + rules.cite("max_concurrency"),
        f"base capacity = {knee.base_capacity if knee.base_capacity is not None else '—'}: the "
        "highest stage with 100 % success, memory ≤ 85 % and the tail within the SLA "
        + rules.cite("base_capacity"),
    ]
    if isinstance(watermark, list | tuple) and len(watermark) == 2:
        lines.append(
            f"production watermark = {watermark[0]}-{watermark[1]}: 70–80 % of the base "
            "capacity, what to promise with margin for bursts " + rules.cite("watermark")
        )
    return lines
