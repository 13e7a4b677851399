"""End-to-end tests on a busy machine: the right answer, or "cannot tell" for a late client or
an answer the noise picked (or that rests on a tail within the noise of the limit).

A sweep whose load generator was starved (a CPU hog beside it, four test workers on two cores)
measured the client, not the server; the analysis then says "cannot tell" (exit 3, reason
``late_client``: docs/method.md, Late load generator) instead of a wrong number. An end-to-end
test accepts that answer only with its evidence: the standing names late stages whose measured
lag breaks the one rule (:func:`analysis.knee.late_client.is_late_client`), each at or below the
first level past the answer, and the run's own record table has that lag; or the standing is
``unsure`` and the knee's own resamples gave another answer more often than the answer
(:func:`analysis.advice.standing.moved_by_noise`); or the standing is ``tail_in_doubt`` and a
level the answer counts before the knee had flattened with its tail undecided, above the fit's
interval (:func:`analysis.advice.standing.tail_in_doubt`); or the standing is ``starved_server``:
the server shared the machine, the machine was overloaded at the first level past the answer by
the run's own host-load figure, and the server's throughput fell there
(:func:`analysis.advice.standing.starved_server`). Asserted on the facts, never on the words.
"""

from __future__ import annotations

from typing import Any

from analysis.advice.standing import moved_by_noise, starved_server, tail_in_doubt
from analysis.diagnosis.failures import overloaded_stages
from analysis.knee.facts import ConfidenceFact
from analysis.knee.late_client import is_late_client
from analysis.pipeline import Analysis


def _check(standing: dict[str, Any], summary: list[dict[str, Any]], confidence_pct: Any) -> None:
    if standing["reason"] == "unsure":  # most resamples gave another answer: under half agree
        # (knee.json shows no share where a stage setting the answer had no windows to draw:
        # analysis.knee.confidence; the share itself is then checked on the analysis)
        assert confidence_pct is None or confidence_pct < 50.0, (standing, confidence_pct)
        return
    if standing["reason"] == "tail_in_doubt":  # checked on the knee: see late_cannot_tell
        assert standing["in_doubt"] is not None, standing
        return
    if standing["reason"] == "starved_server":  # the fall: checked on the knee in late_cannot_tell
        fact = standing["starved"]
        assert fact["host_load_1m"] >= fact["limit_per_cpu"] * fact["host_cpus"], fact
        loads = [row.get("host_load_1m") for row in summary if row["target_users"] == fact["users"]]
        assert fact["host_load_1m"] in loads, (fact, loads)  # the run's own figure
        return
    assert standing["reason"] == "late_client", standing
    late = list(standing["late"])
    if standing.get("baseline_late") is not None:
        late.append(standing["baseline_late"])
    assert late, standing
    measured = [row.get("client_lag_mean_ms") for row in summary]
    past = standing["first_past"]
    for fact in late:
        assert fact["kind"] == "client_late", fact
        assert is_late_client(fact["lag_mean_ms"], fact["e2e_p50_ms"]), fact
        assert fact["lag_mean_ms"] in measured, (fact, measured)  # the run's own figure
    for fact in standing["late"]:
        assert past is None or fact["users"] <= past, (fact, past)


def late_cannot_tell(analysis: Analysis) -> bool:
    """True when ``analysis`` says "cannot tell" because its load generator was late or the noise
    picked its answer (checked against its facts); False when it answers (the caller checks the
    answer). Any other "cannot tell" fails."""
    import dataclasses

    standing = analysis.standing
    if not standing.cannot_tell:
        return False
    summary = analysis.summary.to_dict(orient="records")
    # the share counted, also where the stages setting the answer could not be resampled (the
    # knee then shows none): a lower stage's measured noise can still move the answer
    fact = analysis.knee.confidence
    share = fact.same_pct if isinstance(fact, ConfidenceFact) else analysis.knee.confidence_pct
    _check(dataclasses.asdict(standing), summary, share)
    if standing.reason == "unsure":  # the evidence in full: another answer more common
        assert moved_by_noise(analysis.knee) is not None, analysis.knee.confidence
    if standing.reason == "tail_in_doubt":  # a flattened level's tail within the noise of 2x,
        # above the fit's interval, yet counted before the knee
        knee = analysis.knee
        assert tail_in_doubt(knee) == standing.in_doubt, standing  # the lowest such level
        assert knee.capacity_high is not None and knee.max_concurrency is not None, knee
        assert knee.capacity_high < (standing.in_doubt or 0) <= knee.max_concurrency, knee
    if standing.reason == "starved_server":  # overloaded there, and the throughput fell
        overloaded = overloaded_stages(analysis.summary, analysis.run.run_info)
        fact, past = standing.starved, standing.first_past
        assert fact is not None and fact in overloaded, (fact, overloaded)
        assert starved_server(analysis.knee, (fact.users,), overloaded) == fact  # it fell there
        assert past is None or fact.users <= past, (fact, past)  # a level that decided it
    recs = analysis.recommendations
    assert recs.deploy is None and recs.items == (), recs  # nothing recommended from it
    return True


def late_cannot_tell_doc(doc: dict[str, Any]) -> bool:
    """The same from a knee.json document (a ``loadknee run`` or ``analyze`` that exited 3)."""
    standing = doc.get("standing")
    if standing is None or standing["kind"] != "cannot_tell":
        return False
    _check(standing, doc["summary"], doc["knee"].get("confidence_pct"))
    return True
