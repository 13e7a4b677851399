"""Tell a server's refusals (its own admission limit) from a breakdown, one failure at a time.

Why: TGI's ``--max-concurrent-requests``, Ray Serve's ``max_queued_requests`` and gateways
(Envoy ``max_requests``, load balancers' in-flight limits) turn requests away *at once* (HTTP
429/503, "Model is overloaded") instead of queueing them. Such failures start at one concurrency
level and mark a capacity the server enforces: the sweep should refine below it, as below a knee,
and the answer is the highest level with none. Slow failures (timeouts, a 5xx after the server
worked on the request, a stream cut mid-way) are a breakdown: the red line, as before.

Pure and stdlib-only, so the sweep (inside Locust) and the analysis (pandas) share one rule:

* a failure is a **refusal** when its outcome is ``http_error`` or ``connect_error`` and either
  its HTTP status is 429 or 503 and its message reads as overload (:data:`OVERLOAD_WORDS`), or it
  came back in at most :data:`FAST_SHARE` (20 %) of the stage's median served e2e (far shorter
  than a served request). A timeout, a cut stream or an error object is never one;
* a stage **refuses** (:func:`stage_refuses`) when it has failures, every one is a refusal, and
  it served some requests too (a server that turns away everything is down, not full).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: statuses servers and gateways use to turn a request away
REFUSAL_STATUSES = frozenset({429, 503})
#: outcomes a refusal can have (a refused request gets a status, or its connection is refused)
REFUSAL_OUTCOMES = frozenset({"http_error", "connect_error"})
#: a failure faster than this share of the stage's median served e2e was not worked on
FAST_SHARE = 0.2
#: words of the messages servers send with a refusal (lower case)
OVERLOAD_WORDS = (
    "overload",
    "too many",
    "capacity",
    "busy",
    "rate limit",
    "queue full",
    "queue is full",
    "max_concurrent",
    "concurrency limit",
    "try again",
    "unavailable",
)


@dataclass(frozen=True)
class Failure:
    """One failed request as the classifier needs it (``e2e_ms`` NaN/None when unknown)."""

    outcome: str
    http_status: int | None = None
    error: str = ""
    e2e_ms: float | None = None


def overload_message(error: str) -> bool:
    """True when ``error`` reads as "the server is full" (:data:`OVERLOAD_WORDS`)."""
    text = error.lower()
    return any(word in text for word in OVERLOAD_WORDS)


def is_refusal(failure: Failure, served_p50_ms: float | None) -> bool:
    """True when ``failure`` was turned away at once (module docstring); ``served_p50_ms`` is
    the stage's median e2e of served requests (None/NaN: no served request to compare with)."""
    if failure.outcome not in REFUSAL_OUTCOMES:
        return False
    if failure.http_status in REFUSAL_STATUSES and overload_message(failure.error):
        return True
    e2e, ref = failure.e2e_ms, served_p50_ms
    if e2e is None or ref is None or math.isnan(e2e) or math.isnan(ref) or ref <= 0:
        return False
    return e2e <= FAST_SHARE * ref


def refused_count(failures: Iterable[Failure], served_p50_ms: float | None) -> tuple[int, int]:
    """(refusals, failures) among ``failures``."""
    refused = failed = 0
    for failure in failures:
        failed += 1
        refused += is_refusal(failure, served_p50_ms)
    return refused, failed


def stage_refuses(refused: int, errors: int, served: int) -> bool:
    """True when a stage's failures are all refusals (and it has some) while it served
    ``served`` > 0 others: the server's admission limit, not a breakdown."""
    return errors > 0 and refused >= errors and served > 0


def refusing_stage(failures: Iterable[Failure], served_e2e_ms: Sequence[float]) -> bool:
    """:func:`stage_refuses` over a stage's failures and its served requests' e2e."""
    ordered = sorted(served_e2e_ms)
    p50 = ordered[len(ordered) // 2] if ordered else None
    return stage_refuses(*refused_count(failures, p50), len(ordered))
