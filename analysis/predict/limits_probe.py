"""Read the concurrency probe: a slot limit, a KV budget, or no limit within the burst.

Before the sweep the client sends two bursts of streamed requests, one at the run's prompt and
one at twice it (run.json's ``prompt_source.concurrency_probes``, each with every answered
request's first-token and end times: ``loadknee_locust.client.concurrency_probe``). Why: without
``/metrics`` a run of one length cannot tell its slot limit from a KV budget that fills at the
same batch, and a what-if at longer contexts turns on which it was.

* **Streaming at once** (:func:`streaming_at_once`): the count of requests between their first
  token and their end, over the burst, as a step in time; the burst's figure is the largest
  count held for at least :data:`HOLD_SHARE` of the time from the first token to the last end
  (two streams read in the same instant are no extra slot). The burst hit a limit only where
  requests sent before another had ended got their first token after that end (``queued``, at
  least :data:`MIN_QUEUED` of them): they waited for room (one the client sent late did not).
  A burst where none did streamed all it sent at once: no limit up to its size.
* **Which limit** (:func:`read_probe`), with ``c₁`` and ``c₂`` the counts and ``L₁``, ``L₂``
  the tokens a sequence holds (prompt + completion) at the two lengths: a slot limit holds the
  same batch at both, a KV budget ``B`` holds ``⌊B / L⌋``, about ``c₁ · L₁ / L₂`` at twice the
  prompt. Both bursts queued and ``c₂`` nearer ``c₁`` than ``c₁ · L₁ / L₂``: **slots** ``c₁``
  (and no KV budget seen). Otherwise **kv**: ``B`` lies in ``[c₂ L₂, (c₂ + 1) L₂)``, and also
  in ``[c₁ L₁, (c₁ + 1) L₁)`` where the first burst was KV-bound too; where ``c₁ L₁`` is below
  ``c₂ L₂`` the KV budget would have held more at the run's prompt than ran, so ``c₁`` was a
  slot limit beside it. Only the second burst queued: **kv** from it alone. Neither: **unseen**.
  Only the first queued (fewer at the shorter prompt): the bursts disagree, nothing is read.
* A burst where fewer than half its requests streamed says nothing (errors, not a limit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from analysis.predict.facts import Burst, Estimate, ProbeLimit, ProbeReading
from loadknee_core.numeric import json_number

#: a count must hold for this share of the burst's streaming time to be its figure
HOLD_SHARE = 0.1
#: a burst with fewer of its requests answered than this share says nothing
MIN_ANSWERED_SHARE = 0.5
#: a burst hit a limit only where at least this many of its requests waited for room: one
#: straggler is a busy machine's (fresh #55: a fake server with 64 slots and no budget, one
#: thread of 32 starved past the first end beside a CPU hog and five test processes, read as a
#: KV budget); a limit within the burst keeps a burst of 32 waiting 2 or more unless it is 31
MIN_QUEUED = 2


def streaming_at_once(streams: Sequence[Sequence[float]]) -> tuple[int, bool]:
    """The largest count of requests streaming at once held for at least :data:`HOLD_SHARE` of
    the time from the first first token to the last end, and whether requests waited for room
    (:data:`MIN_QUEUED` or more): their first token came after another's end though they were
    sent before it.

    Each stream is ``(first token, end)``, or ``(sent, first token, end)``: with the send time a
    request the client sent late (a busy client's thread) is not read as one that waited.
    """
    spans = [tuple(s) for s in streams if len(s) in (2, 3) and s[-1] >= s[-2]]
    if not spans:
        return 0, False
    first_end = min(s[-1] for s in spans)
    waited = sum(s[-2] > first_end and (len(s) == 2 or s[0] < first_end) for s in spans)
    queued = waited >= MIN_QUEUED
    events = sorted([(s[-2], 1) for s in spans] + [(s[-1], -1) for s in spans])
    start, stop = events[0][0], events[-1][0]
    held: dict[int, float] = {}  # count → time at it
    count, at = 0, start
    for t, step in events:
        held[count] = held.get(count, 0.0) + (t - at)
        count, at = count + step, t
    window = stop - start
    if window <= 0:
        return len(spans), queued
    above = 0.0  # time at this count or more, from the top down
    for level in sorted(held, reverse=True):
        above += held[level]
        if above >= HOLD_SHARE * window:
            return level, queued
    return 0, queued


def _burst(raw: Any) -> Burst | None:
    if not isinstance(raw, Mapping):
        return None
    tokens = json_number(raw.get("prompt_tokens"))
    if tokens is None:
        tokens = json_number(raw.get("target_tokens"))
    completion = json_number(raw.get("completion_tokens"))
    sent = json_number(raw.get("sent"))
    streams = []
    for entry in raw.get("streams") or ():
        if isinstance(entry, Sequence) and not isinstance(entry, str) and len(entry) in (2, 3):
            times = [json_number(t) for t in entry]
            if all(t is not None and math.isfinite(t) for t in times):
                streams.append(tuple(t for t in times if t is not None))
    if tokens is None or completion is None or not sent or tokens < 1 or completion < 0:
        return None
    if len(streams) < MIN_ANSWERED_SHARE * sent:
        return None
    at_once, queued = streaming_at_once(streams)
    return Burst(tokens, completion, len(streams), at_once, queued)


def _span(count: int, context: float) -> tuple[float, float]:
    """The KV budgets that hold exactly ``count`` sequences of ``context`` tokens."""
    return count * context, (count + 1) * context


def _estimate(low: float, high: float) -> Estimate:
    return Estimate((low + high) / 2.0, low, high)


def classify(short: Burst, long: Burst) -> ProbeReading:
    """What two bursts, at the run's prompt and at twice it, say (the module docstring)."""
    bursts = (short, long)
    if not long.queued:
        limit: ProbeLimit = "inconsistent" if short.queued else "unseen"
        return ProbeReading(bursts, limit)
    at_long = _span(long.at_once, long.context)
    if not short.queued:
        return ProbeReading(bursts, "kv", kv_tokens=_estimate(*at_long))
    as_kv = short.at_once * short.context / long.context
    if abs(long.at_once - short.at_once) <= abs(long.at_once - as_kv):
        return ProbeReading(bursts, "slots", slots=short.at_once)
    if short.at_once * short.context < long.at_once * long.context:
        return ProbeReading(bursts, "kv", slots=short.at_once, kv_tokens=_estimate(*at_long))
    at_short = _span(short.at_once, short.context)
    low, high = max(at_short[0], at_long[0]), min(at_short[1], at_long[1])
    if low >= high:  # the two spans miss each other (noise): the span over both
        low, high = min(at_short[0], at_long[0]), max(at_short[1], at_long[1])
    return ProbeReading(bursts, "kv", kv_tokens=_estimate(low, high))


def read_probe(run_info: Mapping[str, Any]) -> ProbeReading | None:
    """The probe's reading from run.json (None: no probe, or a burst that says nothing)."""
    source = run_info.get("prompt_source")
    raw = source.get("concurrency_probes") if isinstance(source, Mapping) else None
    if not isinstance(raw, list) or len(raw) != 2:
        return None
    short, long = _burst(raw[0]), _burst(raw[1])
    if short is None or long is None or long.prompt_tokens <= short.prompt_tokens:
        return None
    return classify(short, long)
