"""The late load generator: one rule, read by the knee's judgement and by the screen's warning.

Every request of a load-generator process is a greenlet on one event loop; a busy client sends
its requests late and stamps their tokens late, and the requests' own rows cannot tell that
delay from the server's. Each process measures it (``client.csv``'s ``loop_lag_max_ms``; per
stage ``client_lag_mean_ms``, ``client_lag_p95_ms``/``client_lag_max_ms`` in the record table).
The rule reads the mean: the delay an average send or token stamp saw, which is what shifts the
stage's figures; a single stall (a worker starting its users, a garbage collection) shows in the
P95 of the rows' largest lags and barely moves a percentile of hundreds of requests (beside a
test suite a worker's start read 97 ms at the baseline, mean 6 ms). A stage whose lag is
large against its latency measured the client, not the server: it is untrusted and cannot be
the knee (:func:`analysis.knee.stage_verdict.evaluate_stage`), and an answer that such a stage
could have moved is "cannot tell" (:mod:`analysis.advice.standing`). On two busy cores an
independent server refusing above 10 was answered 9 "bound by the knee", and a simulator whose
knee is at 8 users was answered 16, each with the stages that decided it late by hundreds of ms.

docs/method.md: Late load generator.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from analysis.knee.facts import LateClientFact
from analysis.model import Baseline, Signal
from loadknee_core.numeric import num

#: a stage's mean client lag at or over this is late whatever its latency
LATE_CLIENT_MS = 50.0
#: ... or over this share of the stage's e2e P50
LATE_CLIENT_SHARE_PCT = 10.0
#: ... and at least this: below it, the scheduler's jitter, not a starved client
LATE_CLIENT_FLOOR_MS = 5.0


def is_late_client(lag_mean_ms: float | None, e2e_p50_ms: float | None) -> bool:
    """The rule on one stage's figures (``None``: not measured): mean lag at or over
    :data:`LATE_CLIENT_MS`, or over :data:`LATE_CLIENT_SHARE_PCT` % of the e2e P50 and at least
    :data:`LATE_CLIENT_FLOOR_MS`."""
    if lag_mean_ms is None:
        return False
    if lag_mean_ms >= LATE_CLIENT_MS:
        return True
    share = e2e_p50_ms is not None and lag_mean_ms > e2e_p50_ms * LATE_CLIENT_SHARE_PCT / 100
    return share and lag_mean_ms >= LATE_CLIENT_FLOOR_MS


def late_client_fact(row: Any) -> LateClientFact | None:
    """What the stage's load generator's lag was against the rule (None: not measured, as in a
    run recorded before the lag was); ``row``: a record-table row (a Series or a dict)."""
    lag, users = num(row.get("client_lag_mean_ms")), num(row.get("target_users"))
    if lag is None or users is None:
        return None
    e2e, cpus = num(row.get("e2e_p50_ms")), num(row.get("host_cpus"))
    p95 = num(row.get("client_lag_p95_ms")) or lag
    return LateClientFact(
        "client_late" if is_late_client(lag, e2e) else "client_lag",
        users=int(users),
        lag_mean_ms=lag,
        lag_p95_ms=p95,
        lag_max_ms=num(row.get("client_lag_max_ms")) or p95,
        e2e_p50_ms=e2e,
        host_load_1m=num(row.get("host_load_1m")),
        host_cpus=None if cpus is None else int(cpus),
        limit_ms=LATE_CLIENT_MS,
        share_pct=LATE_CLIENT_SHARE_PCT,
        floor_ms=LATE_CLIENT_FLOOR_MS,
    )


def late_client_signal(row: Any) -> Signal | None:
    """Fires on a stage whose load generator was late (:func:`is_late_client`); its value is the
    mean lag (ms), its threshold :data:`LATE_CLIENT_MS`. None where the lag was not measured (a
    run recorded before it was): such a stage is judged as it always was."""
    fact = late_client_fact(row)
    if fact is None:
        return None
    return Signal("client_late", fact.late, fact.lag_mean_ms, LATE_CLIENT_MS, fact=fact)


def late_baseline(summary: pd.DataFrame, baseline: Baseline) -> LateClientFact | None:
    """The sequential baseline stage's lag fact where its load generator was late (None where
    it was not, was not measured, or the baseline is a level stage: judged with the levels).
    Its tail is every stage's yardstick: a late one hides a departed tail."""
    if baseline.source != "baseline" or baseline.stage is None or "stage" not in summary:
        return None
    rows = summary[summary["stage"] == baseline.stage].to_dict(orient="records")
    fact = late_client_fact(rows[0]) if rows else None
    return fact if fact is not None and fact.late else None
