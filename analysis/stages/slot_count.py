"""How many requests the server served at once, read from the client's own rows.

A request holds a slot at least from its first token to its end: whatever the server does
before the first token (queue or prefill), from then on it is decoding. So the most requests
ever between their first token and their end at one instant (:func:`decoding_slots`) is a count
of slots the server must have had; on a server with a slot limit that the sweep reached it is
that limit, reached whenever the slots all decode at once. It found 8 on llama-server with
``--parallel 8`` (four sweeps, up to 32 users) and 4, 8 and 12 on simulators with those limits.
The count is order-free: llama-server does not hand a freed slot to the oldest waiting request
(a first-come-first-served reconstruction missed 14 % of one stage's first tokens at its 8
slots).

With the slots known, a request's service begins when a slot frees for it
(:func:`service_starts`: slots are granted in the order of the first tokens, a slot freed at
each end the client saw) and never after its own first token. Ordered by arrival instead (first
come first served), the estimate read 9.3 in service against llama-server's 8.0 at 12 users;
ordered by first token, 8.0 on all four sweeps.

Why not read the wait off TTFT: a slot queue and a growing batch both make TTFT
grow. On llama-server (8 slots, one CPU thread) at 8 users every request took about a service
time to its first token (a batched prefill) and nothing waited; reading the TTFT excess as
waiting put 4.8-5.2 requests in service against the server's gauge of 8.0. A server with no
slot limit in the tested range has its requests all decoding at once at the top level: the
count is its users there, and nothing waits.

Where this cannot tell: a server with no slot limit whose requests drift out of step while a
prefill takes as long as a decode never has all its requests decoding at once, and reads as a
limit below its users (a closed loop modelled so, 16 users with TTFT growing 50 ms per request in
service against a 600 ms decode, read 11). The reading of TTFT that this replaced erred the
same way on every compute-bound server; the server's own gauge, where scraped, is checked
against this estimate (``tests/analysis/stages/gauge_agreement.py``).

Pure numpy: two sorted searches for the count, two sorts for the starts.
"""

from __future__ import annotations

import numpy as np

#: a request's end counts this much earlier: the client reads an end a little after the server
#: freed the slot (the last chunk, the connection), and the next request may be decoding by then
END_LAG_S = 0.02


def decoding_slots(firsts: np.ndarray, ends: np.ndarray) -> int | None:
    """The most requests between their first token and their end (less :data:`END_LAG_S`) at
    one instant; None without such a request. ``firsts`` and ``ends``: unix s per request."""
    begins = np.sort(firsts)
    finished = np.sort(ends - END_LAG_S)
    if len(begins) == 0:
        return None
    # at each first token: those begun by then less those already ended
    open_at = np.arange(1, len(begins) + 1) - np.searchsorted(finished, begins, "right")
    return int(open_at.max()) if open_at.max() > 0 else None


def _grants(firsts: np.ndarray, sorted_ends: np.ndarray, slots: int) -> np.ndarray:
    """When a slot freed for each request, in first-token order (``firsts`` sorted): the
    ``k``-th once ``k - slots + 1`` requests had ended."""
    freed = np.full(len(firsts), -np.inf)
    if len(firsts) > slots:
        freed[slots:] = sorted_ends[: len(firsts) - slots]
    return freed


def slot_count(starts: np.ndarray, firsts: np.ndarray, ends: np.ndarray) -> int | None:
    """The server's slots: :func:`decoding_slots`, or None where the requests in flight all
    decoded at once at their peak (no limit bound: nothing waited)."""
    decoding = decoding_slots(firsts, ends)
    if decoding is None:
        return None
    arrived, finished = np.sort(starts), np.sort(ends)
    peak = int((np.arange(1, len(arrived) + 1) - np.searchsorted(finished, arrived, "right")).max())
    return decoding if decoding < peak else None


def service_starts(starts: np.ndarray, firsts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Each request's service start (unix s, in the order given), with the slots of
    :func:`slot_count`: requests get their slots in the order of their first tokens, the
    ``k``-th once ``k - slots + 1`` requests have ended; never before its own start, never
    after its own first token. Where no limit bound, its start (nothing waited)."""
    slots = slot_count(starts, firsts, ends)
    if slots is None:
        return starts.copy()
    granted = np.empty(len(starts))
    granted[np.argsort(firsts, kind="stable")] = _grants(np.sort(firsts), np.sort(ends), slots)
    return np.minimum(np.maximum(granted, starts), firsts)
