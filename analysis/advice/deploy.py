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

import pandas as pd

from analysis import rules
from analysis.knee.params import KneeParams
from analysis.knee.refusal_signal import REFUSALS
from analysis.model import DeployAnswer, DeployBound, KneeResult, StageVerdict
from analysis.numeric import counted
from analysis.report.knee_words import signal_text
from analysis.report.stage_reasons import reasons_text

#: bound → the words used in "bound by ..."; order breaks ties at one stage
BOUND_WORDS: dict[DeployBound, str] = {
    "knee": "the knee",
    "sla": "the latency SLA",
    "refusals": "the server's refusals",
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
    if REFUSALS in fired:  # turned away at once: the server's own limit, not a breakdown
        out.append("refusals")
    elif fired & {"errors", "error_rate", "oom"}:
        out.append("errors")
    pressure = next((s for s in verdict.signals if s.name == "memory_pressure"), None)
    # strictly above: the base capacity allows memory at the threshold, and so does this answer
    if (
        pressure
        and pressure.value is not None
        and pressure.threshold is not None
        and (pressure.value > pressure.threshold)
    ):
        out.append("memory")
    return out


#: the signals that make a knee a hard limit: requests waited for a slot (the server's own gauge
#: or the client-side queue); a knee without them is latency growing with the batch
QUEUE_SIGNALS = frozenset({"server_saturated", "client_saturated"})


def _tail_departed(verdict: StageVerdict) -> bool:
    return any(s.name == "tail_departure" and s.fired for s in verdict.signals)


def _tail_note(previous: StageVerdict, users: int) -> str:
    """Said when the answer lands on a stage whose tail has already departed."""
    if previous.target_users != users or not _tail_departed(previous):
        return ""
    tail = next(s for s in previous.signals if s.name == "tail_departure")
    return (
        f"; note: at {counted(users, 'user')} the tail has already departed ({signal_text(tail)})"
    )


def _why(bound: str, verdict: StageVerdict) -> str:
    sig = {s.name: s for s in verdict.signals}
    if bound in ("sla", "memory") or (bound == "errors" and "errors" in sig):
        name = {"sla": "sla", "memory": "memory_pressure", "errors": "errors"}[bound]
        return signal_text(sig[name])
    if bound == "refusals":
        return signal_text(sig[REFUSALS])
    if bound == "knee":
        return _knee_why({name for name, s in sig.items() if s.fired})
    return "; ".join(reasons_text(verdict)[:1])


def _knee_why(fired: set[str]) -> str:
    """Why the knee stage is the knee, in the words of the signals that made it one."""
    curve = "throughput stopped growing while the tail departed"
    if "server_saturated" in fired:
        queue = "the server queued requests with every slot busy"
    elif "client_saturated" in fired:
        queue = (
            "requests waited for a slot while the server ran all it would (seen from the client)"
        )
    else:
        return curve
    both = "throughput_flattening" in fired and "tail_departure" in fired
    return f"{queue}, and {curve}" if both else queue


def deploy_answer(summary: pd.DataFrame, knee: KneeResult) -> DeployAnswer:
    """The concurrency to configure, the limit that bound it and why, in one line."""
    del summary  # the verdicts carry every figure the answer needs
    # a stage not judged (no usable rows, or rows that disagree with stages.csv) is never the
    # answer, nor "the tested range": it was not measured (analysis.advice.standing)
    stages = sorted(knee.judged, key=lambda v: (v.target_users, v.stage))
    cite = rules.cite("deploy")
    if not stages:
        return DeployAnswer(None, "none", f"no step stage was measured {cite}")
    previous: StageVerdict | None = None
    departed: StageVerdict | None = None  # the first trusted stage whose tail departed
    interactive: StageVerdict | None = None  # the stage before it
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
            if bound == "knee" and departed is not None and departed.target_users < users:
                fired = {s.name for s in verdict.signals if s.fired}
                if not fired & QUEUE_SIGNALS:  # a soft knee: nothing queued, latency just grew
                    tail = next(s for s in departed.signals if s.name == "tail_departure")
                    batch, users = users, (interactive or departed).target_users
                    capped += (
                        f"; no queue at the knee, and the tail already departed at "
                        f"{counted(departed.target_users, 'user')} ({signal_text(tail)}): "
                        f"{users} for "
                        f"interactive traffic, the highest level whose tail has not left the "
                        f"single-user one (offline batch may run at {batch})"
                    )
            return DeployAnswer(
                users,
                bound,
                f"configure {users} concurrent requests, bound by {words}: at "
                f"{counted(verdict.target_users, 'user')} {why}{capped}"
                f"{_tail_note(previous, users)} {cite}",
            )
        if departed is None and _tail_departed(verdict):
            departed, interactive = verdict, previous
        previous = verdict
    top = stages[-1].target_users
    if departed is not None:
        tail = next(s for s in departed.signals if s.name == "tail_departure")
        first = f"{counted(departed.target_users, 'user')} ({signal_text(tail)})"
        if interactive is None:
            return DeployAnswer(
                None,
                "tail",
                f"no hard knee up to {counted(top, 'user')}, but the tail already departs at "
                f"{first}; test lower concurrency for interactive traffic {cite}",
            )
        return DeployAnswer(
            interactive.target_users,
            "tail",
            f"no hard knee up to {counted(top, 'user')}: latency grows steadily, the tail "
            f"doubles at ~{counted(departed.target_users, 'user')}; configure "
            f"{interactive.target_users} concurrent requests for interactive traffic (the highest "
            f"level whose tail has not left the single-user one; at {first}); offline batch "
            f"jobs, loose on latency, may run at {top} {cite}",
        )
    return DeployAnswer(
        previous.target_users if previous else None,
        "tested_range",
        f"configure {top} concurrent requests, bound only by the tested range: not saturated "
        f"up to {counted(top, 'user')}; sweep higher to find the limit {cite}",
    )


def memory_pressure_pct(knee: KneeResult) -> float:
    """The memory % the knee was judged to be under pressure at (``--knee-memory-pct``)."""
    return float(knee.params.get("memory_pressure_pct", KneeParams().memory_pressure_pct))


def base_capacity_terms(knee: KneeResult) -> str:
    """What a base-capacity stage meets, with the memory threshold the knee was judged with."""
    return f"100 % success, memory ≤ {memory_pressure_pct(knee):g} % and the tail within the SLA"


def context_lines(knee: KneeResult, watermark: object | None) -> list[str]:
    """The other capacity figures, each with its one-line definition."""
    lines = [
        f"max_concurrency = {knee.max_concurrency if knee.max_concurrency is not None else '—'}"
        ": the stage before the knee (or the red line); it ignores the SLA and memory "
        + rules.cite("max_concurrency"),
        f"base capacity = {knee.base_capacity if knee.base_capacity is not None else '—'}: the "
        f"highest stage with {base_capacity_terms(knee)} " + rules.cite("base_capacity"),
    ]
    if isinstance(watermark, list | tuple) and len(watermark) == 2:
        lines.append(
            f"production watermark = {watermark[0]}-{watermark[1]}: a share of the base "
            "capacity, what to promise with margin for bursts " + rules.cite("watermark")
        )
    return lines


def binding_stage(knee: KneeResult, bound: DeployBound) -> StageVerdict | None:
    """The stage whose figures bound the answer: the first trusted stage breaking a limit
    (knee, SLA, memory, errors), or for ``tail`` the first whose tail departed; None for the
    tested range (nothing bound it) or when no stage was measured."""
    stages = sorted((v for v in knee.stages if v.trusted), key=lambda v: (v.target_users, v.stage))
    if bound == "tail":
        return next((v for v in stages if _tail_departed(v)), None)
    return next((v for v in stages if _broken(v)), None)
