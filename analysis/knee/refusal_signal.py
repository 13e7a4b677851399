"""The knee's refusal signal: a stage whose every failure was turned away at once is past the
server's own admission limit, whatever the share.

Why: an error share above the red line's threshold is a breakdown; a server that refuses instead
of queueing (TGI ``--max-concurrent-requests``, a gateway) fails a few requests per stage just
past its limit, often under that threshold, and the answer must not land above the limit. So a
refusing stage (:func:`loadknee_core.refusals.stage_refuses`, counted by
:mod:`analysis.stages.refusals`) ends the capacity like the red line does, under its own name
(``refusals``): the sweep refines below it, the answer is the highest level with none, and the
report names the refusal instead of calling it a breakdown.
"""

from __future__ import annotations

from analysis.knee.facts import RefusalsFact
from analysis.model import KneeResult, Signal, StageVerdict

#: the signal's name (``DeployBound`` and the screen read it)
REFUSALS = "refusals"


def refusal_signal(refused: int, served: int, error_pct: float | None) -> Signal:
    """The fired ``refusals`` signal of a stage where ``refused`` of ``served`` were refused."""
    fact = RefusalsFact("refusals", refused, served, error_pct)
    return Signal(REFUSALS, True, error_pct, 0.0, fact=fact)


def refusal_limit(knee: KneeResult) -> StageVerdict | None:
    """The stage that ends the capacity when it is a refusing one (the red line's stage, below
    any knee), else None: the server enforces its own limit there."""
    if knee.red_line_stage is None:
        return None
    knee_users, red_users = knee.knee_users, knee.red_line_users
    if knee_users is not None and red_users is not None and knee_users < red_users:
        return None  # the knee came first: refusals past it do not bound the answer
    verdict = next((v for v in knee.stages if v.stage == knee.red_line_stage), None)
    if verdict is None or not any(s.fired and s.name == REFUSALS for s in verdict.signals):
        return None
    return verdict
