"""The advice in words: the deploy answer, each setting's reason and each setting withheld.

Written from the records of :mod:`analysis.advice.facts`, once, for the screen, ``--explain``,
record.md, report.html, the YAML comments and knee.json; a reason that is already words (a
``str``: read back from knee.json, or the SLO step's) is said as it is. The golden file
``tests/support/data/golden/advice_words.txt`` pins what each kind says.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import singledispatch
from typing import TypeAlias

from analysis import rules
from analysis.advice import facts
from analysis.advice.deploy import memory_pressure_pct
from analysis.advice.recommend import flag_text
from analysis.model import KneeResult, Signal
from analysis.report.knee_words import signal_text
from analysis.report.slo_words import doubt_text, limits_text
from analysis.report.stage_reasons import reason_text as stage_reason_text
from loadknee_core.numeric import counted
from loadknee_core.slo_targets import SloParams

#: bound → the words used in "bound by ..."
BOUND_WORDS: dict[facts.DeployBound, str] = {
    "knee": "the knee",
    "sla": "the latency SLA",
    "refusals": "the server's refusals",
    "errors": "errors",
    "memory": "memory pressure",
}
_CURVE = "throughput stopped growing while the tail departed"
_QUEUE = {
    "server": "the server queued requests with every slot busy",
    "client": "requests waited for a slot while the server ran all it would (seen from the client)",
}


@singledispatch
def reason_words(reason: facts.AdviceFact | str) -> str:
    """A recommendation's reason in words: each fact's type registers its own words below (a str
    is words already)."""
    if isinstance(reason, str):
        return reason
    raise TypeError(f"no words for {reason!r}")


def _users(n: int | None) -> str:
    return counted(n or 0, "user")


def _why(why: object) -> str:
    """What the limit-breaking stage showed."""
    if why is None:
        return ""
    if isinstance(why, Signal):
        return signal_text(why)
    if isinstance(why, facts.KneeWhyFact):
        if why.queue == "none":
            return _CURVE
        queue = _QUEUE[why.queue]
        return f"{queue}, and {_CURVE}" if why.curve else queue
    return stage_reason_text(why)  # type: ignore[arg-type]


def _bounds(bounds: Sequence[facts.DeployBound]) -> str:
    names = [BOUND_WORDS[b] for b in bounds]
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def _tail(users: int | None, tail: Signal | None) -> str:
    return f"{_users(users)} ({signal_text(tail) if tail is not None else ''})"


#: the deploy answer by its kind (``configure``: :func:`_configure`), over the fact's figures
#: (``f``) and the words :func:`deploy_fact_text` derives from them
DEPLOY_WORDS = {
    "no_stage": "no step stage was measured {cite}",
    "none_safe": "no tested concurrency is safe: already at {at} {bounds} ({why}); test lower "
    "concurrency {cite}",
    "slo_none": "no tested concurrency meets the SLOs ({limits}); test lower {cite}",
    "slo_bound": "configure {f.users} concurrent requests, bound by the SLOs ({limits}): the "
    "highest tested concurrency that meets every one (the knee alone would allow "
    "{f.batch_users}) {cite}",
    "no_hard_knee_low": "no hard knee up to {top}, but the tail already departs at {departed}; "
    "test lower concurrency for interactive traffic {cite}",
    "no_hard_knee": "no hard knee up to {top}: latency grows steadily, the tail doubles at "
    "~{departed_users}; configure {f.users} concurrent requests for interactive traffic (the "
    "highest level whose tail has not left the single-user one; at {departed}); offline batch "
    "jobs, loose on latency, may run at {f.top_users} {cite}",
    "tested_range": "configure {f.top_users} concurrent requests, bound only by the tested "
    "range: not saturated up to {top}; sweep higher to find the limit {cite}",
}


@reason_words.register
def deploy_fact_text(fact: facts.DeployFact) -> str:
    """The deploy answer in one line, with its rule cited."""
    if fact.kind == "configure":
        return _configure(fact)
    return DEPLOY_WORDS[fact.kind].format(
        f=fact,
        at=_users(fact.at_users),
        bounds=_bounds(fact.bounds) if fact.bounds else "",
        why=_why(fact.why),
        limits=_limits(fact.slo_limits),
        top=_users(fact.top_users),
        departed=_tail(fact.departed_users, fact.departed_tail),
        departed_users=_users(fact.departed_users),
        cite=rules.cite(fact.rule),
    )


def _configure(fact: facts.DeployFact) -> str:
    """The stage before the first limit-breaking stage, what bounds it and its tail's note."""
    cite = rules.cite(fact.rule)
    capped = ""
    if fact.cap_users is not None:
        capped = f"; the capacity {fact.cap_users} bounds it"
        if fact.server_slots is not None:
            capped += f" (the server ran at most {fact.server_slots:g} at once)"
    if fact.departed_users is not None:
        capped += (
            f"; no queue at the knee, and the tail already departed at "
            f"{_tail(fact.departed_users, fact.departed_tail)}: {fact.users} for "
            f"interactive traffic, the highest level whose tail has not left the "
            f"single-user one (offline batch may run at {fact.batch_users})"
        )
    note = ""
    if fact.tail_note is not None:
        note = (
            f"; note: at {_users(fact.users)} the tail has already departed "
            f"({signal_text(fact.tail_note)})"
        )
    return (
        f"configure {fact.users} concurrent requests, bound by {_bounds(fact.bounds)}: at "
        f"{_users(fact.at_users)} {_why(fact.why)}{capped}{note} {cite}"
    )


def deploy_bound_text(answer: facts.DeployAnswer) -> str:
    """What bound the deploy figure, for "bound by …": the limit's words, except a soft knee's
    figure (nothing queued at the knee, the tail departed below it), which the tail set: "bound by
    the knee" beside a knee far above the figure read as a contradiction (16 to deploy, the knee
    at 40 on a 40-slot simulator, the tail departed at 24)."""
    fact = answer.fact
    if (
        answer.bound == "knee"
        and isinstance(fact, facts.DeployFact)
        and fact.departed_users is not None
        and fact.batch_users is not None
    ):
        return (
            f"the tail's departure at {_users(fact.departed_users)} (the knee, at "
            f"{_users(fact.at_users)}, queued nothing: an offline batch may run at "
            f"{fact.batch_users})"
        )
    return BOUND_WORDS.get(answer.bound, answer.bound.replace("_", " "))


def deploy_text(answer: facts.DeployAnswer) -> str:
    """The answer's words (already words when read back from knee.json)."""
    return answer.fact if isinstance(answer.fact, str) else deploy_fact_text(answer.fact)


def base_capacity_terms(memory_pct: float) -> str:
    """What a base-capacity stage meets, with the memory threshold the knee was judged with."""
    return f"100 % success, memory ≤ {memory_pct:g} % and the tail within the SLA"


def context_lines(knee: KneeResult, watermark: object | None) -> list[str]:
    """The other capacity figures, each with its one-line definition."""
    terms = base_capacity_terms(memory_pressure_pct(knee))
    lines = [
        "capacity (max_concurrency) = "
        f"{knee.max_concurrency if knee.max_concurrency is not None else '—'}: the stage before "
        "the first stage past it (the knee stage or the red line); it ignores the SLA and memory "
        + rules.cite("max_concurrency"),
        f"base capacity = {knee.base_capacity if knee.base_capacity is not None else '—'}: the "
        f"highest stage with {terms} " + rules.cite("base_capacity"),
    ]
    if isinstance(watermark, list | tuple) and len(watermark) == 2:
        lines.append(
            f"production watermark = {watermark[0]}-{watermark[1]}: a share of the base "
            "capacity, what to promise with margin for bursts " + rules.cite("watermark")
        )
    return lines


@reason_words.register
def _max_concurrency(fact: facts.MaxConcurrencyFact) -> str:
    if fact.kind == "before_knee":
        return (
            f"the capacity: the stage before the knee stage at {fact.limit_users} users, the first "
            "past it (not the stage with the highest throughput) " + rules.cite(fact.rule)
        )
    if fact.kind == "before_red_line":
        return f"no knee, so the stage before the red line at {fact.limit_users} users"
    return (
        "no knee or red line within the tested range: the highest tested stage "
        "(test higher to find the limit)"
    )


@reason_words.register
def _base_capacity(fact: facts.BaseCapacityFact) -> str:
    terms = base_capacity_terms(fact.memory_pressure_pct)
    if fact.found:
        return f"highest stage with {terms}, and no knee yet " + rules.cite(fact.rule)
    return f"no stage met {terms}"


@reason_words.register
def _watermark(fact: facts.WatermarkFact) -> str:
    if fact.kind == "interactive":
        return "interactive traffic keeps the margin below the knee " + rules.cite(fact.rule)
    return (
        f"{fact.low_ratio:.0%}–{fact.high_ratio:.0%} of the base capacity {fact.base_users}: "
        f"{1 - fact.high_ratio:.0%}+ margin for bursts and long-tail requests "
        + rules.cite(fact.rule)
    )


@reason_words.register
def _offline(fact: facts.OfflineFact) -> str:
    if fact.kind == "at_knee":
        return (
            "offline batch jobs, loose on per-request latency, may run at the knee "
            f"({fact.knee_users} users: all requests served, memory below the OOM risk) for the "
            "most throughput"
        )
    if fact.kind == "knee_unclean":
        return (
            "offline batch jobs stay at the capacity: the knee stage itself had failures or "
            "memory at OOM risk"
        )
    return "no knee measured: offline batch jobs use the capacity"


#: the settings' reasons that are one sentence over their fact's figures (``f``), each followed by
#: its rule; ``limit`` and ``assumed`` are the words :func:`_said` adds for a cap and for memory
SAID: dict[type, str] = {
    facts.QueueTimeoutFact: "baseline e2e {f.percentile} {f.baseline_ms:,.0f} ms × {f.margin:g}: "
    "normal requests are not rejected for a short queue; adjust to the queue seen in production",
    facts.CapFact: "from the capacity {f.max_concurrency} (the stage before {limit} at "
    "{f.limit_users} users) × batch size {f.batch_size}: past it the server queues requests "
    "instead of running out of memory",
    facts.OwnLimitFact: "the knee is the server's own concurrency limit: it ran {f.slots} at once "
    "while requests waited, with the KV cache at most {f.kv_peak_pct:.0f} % full; raise {f.flag} "
    "to ~{f.predicted} ({basis}) and re-run the sweep; its current value is the limit, not the "
    "fix",
    facts.GpuMemoryFact: "memory led the failure at the knee / red line: lower it from "
    "{f.current:.2f}{assumed} to {f.lower:.2f} for steadier queueing instead of OOM, at the cost "
    "of a smaller KV-cache pool",
    facts.ModelLenFact: "from the replayed log's longest real context, {f.longest_tokens:,.0f} "
    "tokens over {f.records:,.0f} requests, × {f.headroom:g} headroom, rounded up to a power of "
    "two: reserving the model's full length wastes KV cache that concurrency could use",
}
OneSentenceFact: TypeAlias = (
    facts.QueueTimeoutFact | facts.CapFact | facts.OwnLimitFact | facts.GpuMemoryFact
    | facts.ModelLenFact
)  # fmt: skip
#: where a concurrency cap was read: the stage before which limit
CAP_LIMITS = {"knee": "the knee", "red_line": "the red line"}


@reason_words.register(facts.QueueTimeoutFact)
@reason_words.register(facts.ModelLenFact)
def _said(fact: OneSentenceFact, **words: str) -> str:
    return f"{SAID[type(fact)].format(f=fact, **words)} {rules.cite(fact.rule)}"


@reason_words.register
def _own_limit(fact: facts.OwnLimitFact) -> str:
    if fact.pool_tokens is not None and fact.request_tokens is not None:
        basis = (
            f"the engine's KV pool of {fact.pool_tokens:,} tokens holds that many requests of "
            f"the run's longest, {fact.request_tokens:,.0f} tokens, at "
            f"{fact.memory_pressure_pct:g} %"
        )
    else:
        basis = (
            f"what the KV gauge's peak predicts at {fact.memory_pressure_pct:g} %; the server "
            "did not state its KV pool, so another run may say another value"
        )
    scope = _own_limit_scope(fact)
    return _said(fact, basis=f"{basis}; {scope}" if scope else basis)


def _own_limit_scope(fact: facts.OwnLimitFact) -> str:
    """Which figure more slots move where the deploy answer is a soft knee's ("" otherwise)."""
    if fact.interactive_users is None or fact.offline_users is None:
        return ""
    return (
        f"it raises the offline batch's {fact.offline_users}; the interactive "
        f"{fact.interactive_users} is the tail's, which more slots do not move"
    )


@reason_words.register
def _cap(fact: facts.CapFact) -> str:
    return _said(fact, limit=CAP_LIMITS[fact.limit])


@reason_words.register
def _gpu_memory(fact: facts.GpuMemoryFact) -> str:
    return _said(fact, assumed=" (vLLM default, assumed)" if fact.assumed else "")


@reason_words.register
def _request_timeout(fact: facts.RequestTimeoutFact) -> str:
    if fact.method == "tpot":
        how = (
            f"TTFT P95 {fact.ttft_p95_ms:,.0f} ms + {fact.tokens:,.0f} tokens × TPOT P95 "
            f"{fact.tpot_p95_ms or 0.0:,.1f} ms"
        )
    else:
        how = (
            f"{fact.tokens:,.0f} tokens × {fact.ms_per_token or 0.0:,.1f} ms per token (median)"
            f" × {fact.tail_ratio or 0.0:.2f} (P99/P50)"
        )
    return (
        f"the longest output at {fact.users} users: {how} = {fact.output_ms:,.0f} ms, × "
        f"{fact.margin:g}; shorter cuts normal long answers, longer lets stuck requests hold a "
        "slot " + rules.cite(fact.rule)
    )


@reason_words.register
def _replicas(fact: facts.ReplicasFact) -> str:
    measured = "measured" if fact.measured else "assumed linear; measure N replicas"
    return (
        f"target {fact.target} concurrent users / ({fact.per_replica} per replica at the "
        f"watermark × replica efficiency {fact.efficiency:.2f}, {measured})"
    )


def _limits(params: SloParams | None) -> str:
    return "none" if params is None else limits_text(params)


@reason_words.register
def _slo(fact: facts.SloAdviceFact) -> str:
    if fact.kind == "slo_capacity":
        if fact.capacity is None:
            return (
                f"no tested stage met the SLOs ({_limits(fact.slo_limits)}): test lower concurrency"
            )
        doubt = doubt_text(fact.doubt)
        return (
            f"highest concurrency meeting every SLO ({_limits(fact.slo_limits)}) "
            f"{rules.cite(fact.rule)}" + (f"; {doubt}" if doubt else "")
        )
    if fact.kind == "binding":
        if fact.binding == "latency":
            return (
                f"the SLO capacity {fact.capacity} is at or below the capacity "
                f"{fact.max_concurrency}: latency binds first; fewer users per replica, more "
                "replicas"
            )
        if fact.binding == "throughput":
            return (
                f"the capacity {fact.max_concurrency} is below the SLO capacity "
                f"{fact.capacity}: throughput binds first, the SLOs have headroom"
            )
        return "no knee figure to compare the SLO capacity with"
    if fact.kind == "interactive":
        return (
            "the SLO capacity: interactive traffic is what the SLOs "
            f"({_limits(fact.slo_limits)}) protect"
        )
    source = "SLO capacity" if fact.from_slo else "watermark"
    return (
        f"target {fact.target} concurrent users / ({fact.per_replica} per replica from the "
        f"{source} × replica efficiency {fact.efficiency or 0.0:.2f}); {fact.binding}-bound"
    )


#: recommendation-key section → the engine's name
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "tgi": "TGI", "llamacpp": "llama.cpp"}


def is_conditional(item: facts.Recommendation) -> bool:
    """A flag to try, not to set: the server's own limit binds with memory to spare, so its
    value is what the headroom predicts and only a re-run can confirm it."""
    return isinstance(item.reason, facts.OwnLimitFact)


def flag_words(item: facts.Recommendation) -> str:
    """An engine flag in one phrase with the measurement it rests on; a flag to try
    (:func:`is_conditional`) says its condition and that a re-run must measure it."""
    flag, fact = flag_text(item), item.reason
    engine = ENGINE_NAMES.get(item.key.partition(".")[0], "")
    if isinstance(fact, facts.OwnLimitFact):
        scope = _own_limit_scope(fact)
        return (
            f"the server's {fact.slots} slots bind, KV {fact.kv_peak_pct:.0f} % used: raise "
            f"{fact.flag} toward ~{fact.predicted} and re-run to measure"
            + (f" ({scope})" if scope else "")
        )
    if isinstance(fact, facts.CapFact):
        basis = f"capacity {fact.max_concurrency} × batch size {fact.batch_size}"
    elif isinstance(fact, facts.GpuMemoryFact):
        basis = f"memory led the failure; from {fact.current:.2f}"
    elif isinstance(fact, facts.ModelLenFact):
        basis = f"longest context {fact.longest_tokens:,.0f} tokens × {fact.headroom:g}"
    else:
        return f"{flag} ({engine})" if engine else flag
    return f"{flag} ({engine}: {basis})" if engine else f"{flag} ({basis})"


def reason_text(item: facts.Recommendation) -> str:
    """The words after a setting: why this value."""
    return reason_words(item.reason)


def sweep_command(host: str, levels: Sequence[int]) -> str:
    """The ``loadknee run`` command that sweeps ``host`` at ``levels``."""
    return f"loadknee run --host {host} --levels {','.join(str(n) for n in levels)}"


def withheld_text(note: facts.WithheldFact | str) -> str:
    """A setting withheld: why, and what to do instead."""
    if isinstance(note, str):
        return note
    cite = rules.cite(note.rule)
    if note.kind == "not_saturated":
        return (
            f"--max-num-seqs withheld: not saturated up to {note.top_users} users; sweep higher: "
            f"{sweep_command(note.host, note.levels)} {cite}"
        )
    if note.kind == "unknown_engine":
        what = (
            f"the server ran about {note.slots} at once while requests waited, with no sign of "
            "memory pressure: raise its concurrency limit and re-run"
            if note.slots is not None
            else f"cap the server's concurrency at {note.cap} in its own setting"
        )
        return (
            "concurrency flag withheld: the engine is unknown (it exports no /metrics to name "
            f"it); {what} {cite}"
        )
    if note.kind == "refuses":
        return (
            f"no concurrency flag to set: the server already refuses above ~{note.cap} (its own "
            "admission limit: TGI --max-concurrent-requests, a gateway's in-flight limit); keep "
            f"that setting, or raise it and re-run to measure {cite}"
        )
    if note.kind == "already_at_cap":
        return (
            f"{note.flag} withheld: the server already runs {note.flag} {note.cap} (its /props) "
            "and the knee is that limit; this run saw no KV figure to say whether raising it "
            f"fits in memory: keep {note.cap}, or raise it and re-run the sweep {cite}"
        )
    have = "an unknown number of" if note.records is None else f"only {note.records:,.0f}"
    return (
        f"--max-model-len withheld: the replayed log has {have} requests; at least "
        f"{note.min_records or 0:,} are needed before its longest context "
        f"({note.longest_tokens or 0.0:,.0f} tokens) can stand for production's, and a "
        f"too-short limit answers longer requests with HTTP 400 {cite}"
    )
