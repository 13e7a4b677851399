"""The knee's signals in words: every sentence a knee signal says, written from its fact.

The judgement (:mod:`analysis.knee`) returns records (:mod:`analysis.knee.facts`): a kind, the
figures and the threshold. This module is the one place that turns them into the words the
screen, ``--explain``, record.md, report.html and knee.json's ``text`` fields show, with one set
of number formats, so a rewording is one change here and one reviewed diff of the golden files.
"""

from __future__ import annotations

from functools import singledispatch
from typing import TYPE_CHECKING

from analysis import rules
from analysis.knee.facts import (
    AbsentFact,
    ClientCpuFact,
    ClientQueueFact,
    ClientUnqueuedFact,
    ErrorsFact,
    GainFact,
    GaugeCheckFact,
    InFlightFact,
    LateClientFact,
    MemoryFact,
    NoiseFact,
    OomFact,
    PlateauFact,
    QueuePassedFact,
    RefusalsFact,
    ResumedFact,
    ServerQueueFact,
    SlaFact,
    TailFact,
    TailSource,
)
from analysis.knee.fit import whole
from loadknee_core.numeric import counted, fmt, fmt_ms

if TYPE_CHECKING:
    from analysis.knee.facts import SignalFact
    from analysis.model import Signal

#: how a throughput column is named in a sentence
RATE_UNITS = {"output_tok_s": "tok/s", "total_tok_s": "total tok/s", "qps": "req/s"}
#: whose tail the stages' tails are compared with, as the reasons say it
TAIL_SOURCES: dict[TailSource, str] = {
    "baseline": "the baseline's",
    "one_user_level": "the 1-user level's",
}
#: what a stage says when its tail's point figure is past the limit but its noise reaches below
TAIL_UNDECIDED = "cannot tell whether the tail has departed"
#: how each memory figure is named, the knee's and the diagnosis's ("unknown": no gauge named it)
MEMORY_NAMES = {
    "unknown": "memory",
    "kv_cache": "KV-cache",
    "gpu": "GPU memory",
    "gpu_preallocated": "GPU memory (flat across stages: pre-allocated)",
}
ABSENT = {
    "no_server_queue": "the server reports no queue",
    "no_client_queue": "no client-side queue estimate (needs TTFT)",
    "no_in_flight": "no in-flight estimate",
    "no_interval": "no interval computed",
}


#: the reason of a stage where no signal fired
NO_SIGNAL = "no signal fired"


def untrusted_client_text(client: Signal) -> str:
    """The reason of a client-bound stage: its CPU figure, and what that means."""
    return signal_text(client) + ": untrusted, the client may be the limit"


def signal_text(signal: Signal) -> str:
    """The signal in words: its fact's, or the words it was given (a schema-1 knee.json)."""
    return signal.said if signal.fact is None else fact_text(signal.fact)


@singledispatch
def fact_text(fact: SignalFact | GaugeCheckFact) -> str:
    """One fact in words: each fact's type registers its own words below (one function per
    kind of fact, found by the argument's type rather than a chain of cases)."""
    raise TypeError(f"no words for {fact!r}")


def _rate(value: float) -> str:
    """A rate the way a person reads it: 2 decimals under 10, whole numbers above."""
    return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.0f}"


def _times(ratio: float, bound: float | None = None) -> str:
    """2.753 → "2.8", 9.0 → "9": one decimal is all a ratio needs, unless its noise bound is shown
    beside it (to two decimals): then two, or "is 2.6×, at least 2.65×" reads as a contradiction."""
    if bound is not None:
        return f"{ratio:.2f}"
    return f"{ratio:.1f}".rstrip("0").rstrip(".")


@fact_text.register
def _gain(fact: GainFact) -> str:
    text = "no earlier stage to compare with"
    if (
        fact.gain_ratio is not None
        and fact.prev_users is not None
        and fact.users is not None
        and fact.prev_rate is not None
        and fact.rate is not None
        and fact.added_per_user is not None
        and fact.single_user_rate is not None
    ):
        unit = RATE_UNITS.get(fact.column, fact.column)
        x, x_prev = fact.rate, fact.prev_rate
        share = round(fact.gain_ratio * 100) or 0  # never "-0 %"
        more = "added" if x >= x_prev else "lost"
        text = (
            f"{int(fact.prev_users)} → {int(fact.users)} users {more} "
            f"{_rate(abs(x - x_prev))} {unit} in all ({_rate(x_prev)} → {_rate(x)}), "
            f"{_rate(fact.added_per_user)} {unit} per added user = {share} % of the "
            f"{_rate(fact.single_user_rate)} {unit} one user gets alone"
        )
        if fact.gain_upper_ratio is not None:
            text += f", at most {fact.gain_upper_ratio:.2f}× within the noise"
        elif (
            fact.kind == "flattening"
            and fact.below
            and None not in (fact.latency_gain_ratio, fact.latency_gain_upper_ratio)
        ):
            text += (
                f"; by the users over their median latency {fact.latency_gain_ratio:.2f}×, "
                f"at most {fact.latency_gain_upper_ratio:.2f}×"
            )
    pct = f"{fact.threshold_ratio * 100:g} %"
    if fact.kind == "flattening":
        if fact.below:
            return f"{text}: throughput has flattened (flat below {pct})"
        return f"{text} (flat below {pct})"
    if fact.below:
        return f"{text}: the gain is narrowing (below {pct})"
    return f"{text} (narrowing below {pct})"


def capacity_words(low: float, high: float, capacity: float, *, named: bool = True) -> str:
    """``capacity 8 users, 90 % interval 7–8`` (one number when the interval is one user;
    ``named`` False: without the word "capacity")."""
    lo, hi, mid = whole(low), whole(high), whole(capacity)
    lo, hi = min(lo, mid), max(hi, mid)
    span = f"{lo}" if lo == hi else f"{lo}–{hi}"
    return f"{'capacity ' if named else ''}{mid} users, 90 % interval {span}"


@fact_text.register
def _plateau(fact: PlateauFact) -> str:
    words = capacity_words(fact.capacity_low_users, fact.capacity_high_users, fact.capacity_users)
    return (
        f"{fact.users:g} users lie past the breakpoint of the fit over all stages "
        f"({words}): throughput has flattened ({fact.plateau_ratio:.2f}× one user's rate "
        f"per added user after it) {rules.cite(fact.rule)}"
    )


#: per tail metric, its name and unit in a tail's words
TAIL_METRIC_WORDS = {
    "e2e": ("e2e", " ms"),
    "slowdown": ("slowdown against each request's single-user time", "×"),
    "s_per_1k": ("seconds per 1k tokens", " s"),
}


@fact_text.register
def _tail(fact: TailFact) -> str:
    name = fact.percentile.upper()
    what, unit = TAIL_METRIC_WORDS[fact.metric]
    ratio, lower, limit = fact.ratio, fact.lower_ratio, fact.threshold_ratio
    bound = f", at least {lower:.2f}× within the noise" if lower is not None else ""
    upper = fact.upper_ratio
    if fact.outcome == "undecided" and ratio is not None and ratio < limit and upper is not None:
        # below the limit, but the yardstick's noise reaches it: show how far
        low = f"{lower:.2f}× to " if lower is not None else "up to "
        bound = f", {low}{upper:.2f}× within the noise of both tails"
    shown = ratio is not None and fact.outcome != "held"
    times = _times(ratio, lower) if shown and ratio is not None else fmt(ratio)
    if fact.outcome == "departed":
        verdict = f": the tail has departed (at {limit:g}× or more)"
    elif fact.outcome == "undecided":
        verdict = f": {TAIL_UNDECIDED} (departs at {limit:g}×)"
    else:
        verdict = f" (departs at {limit:g}×)"
    return (
        f"{name} {what} {fmt(fact.tail, unit)} is {times}× {TAIL_SOURCES[fact.source]} "
        f"{fmt(fact.base_tail, unit)}{bound}{verdict}"
    )


@fact_text.register
def _sla(fact: SlaFact) -> str:
    name, tail = fact.percentile.upper(), fmt(fact.tail_ms, " ms")
    return f"{name} e2e {tail} against the SLA of {fact.threshold_ms:g} ms"


@fact_text.register
def _memory(fact: MemoryFact) -> str:
    text = f"{MEMORY_NAMES[fact.source]} peak {fmt(fact.peak_pct, ' %')}"
    if fact.kind == "memory_pressure":
        return f"{text} (pressure at {fact.threshold_pct:g} %)"
    return f"{text}: at or above {fact.threshold_pct:g} % the next stage risks OOM"


@fact_text.register
def _oom(fact: OomFact) -> str:
    if fact.kind == "oom_crash":
        return (
            f"GPU memory fell from {fmt(fact.gpu_before_pct, ' %')} to a peak of "
            f"{fmt(fact.gpu_peak_pct, ' %')} while {fact.failed} requests failed: the server "
            "process died (OOM crash?)"
        )
    return (
        f"GPU memory peak {fmt(fact.gpu_peak_pct, ' %')} with {fact.failed} failed requests "
        f"(OOM at {fact.threshold_pct:g} % with failures)"
    )


@fact_text.register
def _errors(fact: ErrorsFact) -> str:
    text = f"success {fmt(fact.success_pct, ' %')} ({fact.failed} of {fact.served} failed)"
    red_line = f"; red line above {fact.threshold_pct:g} % errors"
    return text if fact.kind == "errors" else text + red_line


@fact_text.register
def _refusals(fact: RefusalsFact) -> str:
    return f"{fact.refused} of {fact.served} requests refused at once ({fmt(fact.error_pct, ' %')})"


@fact_text.register
def _client_cpu(fact: ClientCpuFact) -> str:
    peak = fmt(fact.cpu_peak_pct, " %")
    return f"load-generator CPU peak {peak} of a core (client-bound at {fact.threshold_pct:g} %)"


@fact_text.register
def _absent(fact: AbsentFact) -> str:
    return ABSENT[fact.kind]


@fact_text.register
def _server_queue(fact: ServerQueueFact) -> str:
    if fact.kind == "server_free_slots":
        text = (
            f"the server's own counts: {fact.running_mean:.1f} requests running on average of "
            f"the {fact.slots:g} it ran at most, {fact.waiting_mean:.1f} waiting, with "
            f"{fact.in_flight:g} in flight: "
            + (
                "every request was admitted at once"
                if fact.waiting_mean < fact.threshold_waiting
                else "those waiting would all have fit its free slots (they waited for a step, "
                "not a slot)"
            )
            + ", not saturated"
        )
        if fact.overrules_client:
            text += "; the client's figure is untrusted, the server's word stands"
        return text
    share = 0.0 if fact.running_share is None else fact.running_share
    if fact.kv_peak_pct is None:
        why = "more in flight than its most"
    else:  # the KV cache, full, fitted fewer than the most it ran
        why = (
            f"KV cache at {fact.kv_peak_pct:.1f} % (pressure at {fact.kv_pressure_pct:g} %) "
            f"fitting fewer than its most, more in flight than it ran on average"
        )
    return (
        f"the server ran {fact.running_mean:.1f} requests on average, {fact.running_peak:g} at "
        f"most (its most in any stage: {fact.slots:g}) while "
        f"{fact.waiting_mean:.1f} waited with {fact.in_flight:g} in flight (saturated: {why}, "
        f"{fact.threshold_waiting:g} or more waiting, "
        f"{share * 100:.0f} % of the most reached) {rules.cite(fact.rule)}"
    )


@fact_text.register
def _noise(fact: NoiseFact) -> str:
    need = fact.window_needed_s
    need_text = (
        f"; a stage would need ~{need:,.0f} s to reach ±{fact.target_pct:g} %"
        if need is not None
        else ""
    )
    if fact.kind == "window_too_short":
        return (
            f"untrusted: the {fmt(fact.window_s, ' s')} window is too short for an interval "
            f"(fewer than 5 time windows one request long){need_text} {rules.cite(fact.rule)}"
        )
    if fact.too_wide:
        return f"untrusted: throughput ±{fact.width_pct:.0f} %{need_text} {rules.cite(fact.rule)}"
    windows = 0 if fact.windows is None else int(fact.windows)
    return f"throughput ±{fact.width_pct:.1f} % (95 %, {windows} time windows)"


@fact_text.register
def _client_queue(fact: ClientQueueFact) -> str:
    late = ""
    share, wait_ms = fact.late_share_pct, fact.late_wait_ms
    if share is not None and share > 0 and wait_ms is not None:
        late = f"; {share:.0f} % of requests waited ~{wait_ms:,.0f} ms for their first token"
    r_lo, r_hi = fact.running_low, fact.running_high
    band = f" (95 %: {r_lo:.1f}–{r_hi:.1f})" if r_lo is not None and r_hi is not None else ""
    low = fact.waiting_low
    bound = f", at least {low:.1f}" if low is not None else ""
    full = ""
    if fact.kv_fill_pct is not None:
        full = (
            f", the KV the decoding held at {fact.kv_fill_pct:.0f} % of the most it held (a "
            f"length mix: fewer long requests fit)"
        )
    return (
        f"seen from the client: the server ran about {fact.running:.1f} at once{band} "
        f"(its most in any stage: {fact.slots:.1f}) while {fact.waiting:.1f} waited{bound}, "
        f"{fact.in_flight:g} in flight{late} (saturated: more users than it ran{full}, "
        f"{fact.threshold_waiting:g} or more waiting) {rules.cite(fact.rule)}"
    )


@fact_text.register
def _client_unqueued(fact: ClientUnqueuedFact) -> str:
    return (
        f"seen from the client: {fact.waiting:.1f} requests waited on average, no queue; "
        "the client's throughput figure is untrusted, the queue estimate's word stands "
        + rules.cite(fact.rule)
    )


@fact_text.register
def _in_flight(fact: InFlightFact) -> str:
    head = (
        f"the client kept {fact.in_flight:.1f} requests in flight on average for "
        f"{fact.users:g} users"
    )
    if fact.kind == "in_flight_after_errors":
        return f"{head} (requests failed: the users' back-off leaves gaps by design)"
    text = f"{head} ({fact.share * 100:.0f} %; served/s × mean e2e)"
    if fact.share < fact.threshold_share:
        text += (
            f": client-starved, untrusted (below {fact.threshold_share * 100:.0f} %) "
            f"{rules.cite(fact.rule)}"
        )
    return text


def host_load_text(fact: LateClientFact) -> str:
    """ " (host load 7.9 on 2 cores)" where the client host's load was recorded, else ""."""
    if fact.host_load_1m is None or fact.host_cpus is None:
        return ""
    return f" (host load {fact.host_load_1m:.1f} on {counted(fact.host_cpus, 'core')})"


def lag_text(fact: LateClientFact) -> str:
    """The load generator's measured lateness: "lag 60 ms on average, up to 340 ms (host load
    …)"."""
    return (
        f"lag {fmt_ms(fact.lag_mean_ms)} on average, up to {fmt_ms(fact.lag_max_ms)}"
        + host_load_text(fact)
    )


@fact_text.register
def _late(fact: LateClientFact) -> str:
    rule = (
        f"late at {fact.limit_ms:g} ms on average, or over {fact.share_pct:g} % of the e2e P50 "
        f"({fmt_ms(fact.e2e_p50_ms)}) and at least {fact.floor_ms:g} ms"
    )
    if not fact.late:
        return f"the load generator's event loop: {lag_text(fact)}; not late ({rule})"
    return (
        f"the load generator ran late: event-loop {lag_text(fact)} ({rule}): untrusted, its "
        f"latencies and throughput read the client, not the server {rules.cite(fact.rule)}"
    )


@fact_text.register
def _resumed(fact: ResumedFact) -> str:
    more = (fact.later_rate / fact.rate - 1) * 100
    return (
        f"throughput grew again: {fact.later_users} users served {fmt(fact.later_rate)} "
        f"{fact.column}, {more:.0f} % more than {fmt(fact.rate)} here (a dip, not the "
        f"knee; {fact.threshold_pct:g} % or more counts)"
    )


@fact_text.register
def _queue_passed(fact: QueuePassedFact) -> str:
    return (
        f"the queue passed: {fmt(fact.waiting)} requests waited here on average (seen "
        f"from the client), yet at {fact.later_users} users, {fmt(fact.later_in_flight)} "
        f"in flight, {fmt(fact.later_waiting)} did: a slowdown, not the server's limit "
        f"(a queue does not empty as users are added)"
    )


@fact_text.register
def _gauges(fact: GaugeCheckFact) -> str:
    parts = []
    if fact.running_off:
        parts.append(
            f"the client's estimate of requests running ({fact.estimate:.1f}) is "
            f"{abs(fact.estimate / fact.gauge - 1) * 100:.0f} % off the server's gauge "
            f"({fact.gauge:.1f})"
        )
    if fact.server_saturated is not None:
        said = "saturated" if fact.server_saturated else "not saturated"
        parts.append(
            f"the server's counts call the stage {said}, the client's queue estimate does not "
            "(the server's word decides)"
        )
    return "; ".join(parts) + f" {rules.cite(fact.rule)}"
