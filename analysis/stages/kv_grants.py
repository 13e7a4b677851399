"""When KV room freed for each request, read from the client's rows: a slot limit that moves.

A server whose KV cache binds admits a request when its context fits beside the ones running,
so with a length mix it runs more short requests than long ones. The count of requests decoding
at once (:mod:`analysis.stages.slot_count`) then peaks with the short ones (13 on the KV-bound
simulator with a lognormal mix) above what it runs on average (10.4-11.3 by its gauges), and a
slot model with 13 slots saw no request wait at 12-14 users where the server's gauge said
1.6-3.2 waited: the run without ``/metrics`` was answered 14 where its gauges said 13 at most.

The client knows each request's tokens, so it can count the KV they hold:

* **held by the decoding** at an instant: each request between its first token and its end
  holds its prompt and the tokens it has generated so far (spread evenly over its decode);
* **the budget**: the most the decoding requests held at any first token
  (:func:`held_at_firsts`; a request is admitted only when its context fits, so at the moments
  the server admitted under a full cache this is the cache, less what the client cannot see);
* **needed** at a request's start: what every request then in flight holds or will hold once
  admitted (the prompts of those still before their first token count whole: they are ahead
  of it in the queue or in prefill), its own prompt included.

**The fill** at a request's first token is the KV the decoding then held, as a share of the
budget: where the waits come from room, not slots, it reaches the budget while the count running
does not reach the most any stage ran (10.4 at 12 users against 11.9 at 13: which requests ran
together, not a server with room to spare); :mod:`analysis.knee.client_signals` reads it as the
server's own saturation rule reads a full KV cache.

A request whose need exceeded the budget waited for room: its service began at the last end
the client saw before its first token (room frees when a request ends), never before its start.
Read against the KV-bound simulator's gauge: 1.35 / 0.87 / 2.50 / 4.19 waiting at 12 / 13 /
14 / 16 users where the gauge said 1.61 / 1.72 / 3.17 / 4.83 (the slot model: 0 / 0 / 0 /
1.69); nothing at or below 8 users, nothing at any level of the compute-bound simulator (no
limit) and none on llama-server (8 slots) below its slots.

Only where the lengths vary (:data:`MIX_CV`): at fixed lengths the KV budget is a fixed count
of sequences, which the slot model already reads; and a prefill-bound server, whose requests in
prefill hold prompts the decoding count never shows, would read its prefills as KV waits.

Pure numpy: sorted event sums, no loop over requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: the lengths vary (a mix) when the contexts' coefficient of variation reaches this
MIX_CV = 0.25
#: the share of timed requests whose token counts must be known
KNOWN_SHARE = 0.9


def _open_sum(
    t: np.ndarray, begins: np.ndarray, ends: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """At each time in ``t``: the sum of ``weights`` over the intervals ``[begin, end)`` open."""
    by_begin, by_end = np.argsort(begins), np.argsort(ends)
    opened = np.concatenate(([0.0], np.cumsum(weights[by_begin])))
    closed = np.concatenate(([0.0], np.cumsum(weights[by_end])))
    return (
        opened[np.searchsorted(begins[by_begin], t, "right")]
        - closed[np.searchsorted(ends[by_end], t, "right")]
    )


def _generated(
    t: np.ndarray, firsts: np.ndarray, ends: np.ndarray, completion: np.ndarray
) -> np.ndarray:
    """At each time in ``t``: the completion tokens generated so far by the decoding requests,
    each at an even pace from its first token to its end."""
    rate = completion / np.maximum(ends - firsts, 1e-6)
    # a decoding request's tokens at t: rate × (t − first) = rate × t − rate × first
    return t * _open_sum(t, firsts, ends, rate) - _open_sum(t, firsts, ends, rate * firsts)


def held_at_firsts(
    firsts: np.ndarray, ends: np.ndarray, prompt: np.ndarray, completion: np.ndarray
) -> np.ndarray:
    """The KV tokens the decoding requests held at each request's first token (its own
    included); the most of them is the budget."""
    at = firsts + 1e-6
    return _open_sum(at, firsts, ends, prompt) + _generated(at, firsts, ends, completion)


def is_mix(prompt: np.ndarray, completion: np.ndarray) -> bool:
    """Whether the contexts vary enough for the KV budget to move the count that fits."""
    context = prompt + completion
    mean = float(context.mean()) if len(context) else 0.0
    return mean > 0 and float(context.std()) / mean >= MIX_CV


@dataclass(frozen=True)
class KvGrants:
    """Per request, in the order given: when room freed for it (``served_from``, unix s) and
    the fill at its first token (``fill_pct``, % of the budget)."""

    served_from: np.ndarray
    fill_pct: np.ndarray


def kv_grants(
    starts: np.ndarray,
    firsts: np.ndarray,
    ends: np.ndarray,
    prompt: np.ndarray,
    completion: np.ndarray,
) -> KvGrants | None:
    """Each request's service start by the KV it needed, and the fill at its first token
    (module docstring); None where the lengths do not vary or too few token counts are known."""
    known = ~np.isnan(prompt) & ~np.isnan(completion)
    if len(starts) < 2 or known.mean() < KNOWN_SHARE:
        return None
    prompt, completion = np.where(known, prompt, 0.0), np.where(known, completion, 0.0)
    if not is_mix(prompt[known], completion[known]):
        return None
    held = held_at_firsts(firsts, ends, prompt, completion)
    budget = float(held.max())
    if not budget > 0:
        return None
    at = starts + 1e-6
    # in flight at its start: every prompt whole, and the tokens generated by the decoding
    needed = _open_sum(at, starts, ends, prompt) + _generated(at, firsts, ends, completion)
    sorted_ends = np.sort(ends)
    before = np.searchsorted(sorted_ends, firsts, "left") - 1
    last_end = np.where(before >= 0, sorted_ends[np.clip(before, 0, None)], -np.inf)
    freed = np.minimum(np.maximum(last_end, starts), firsts)
    return KvGrants(np.where(needed > budget, freed, starts), 100.0 * held / budget)
