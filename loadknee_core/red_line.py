"""The red line's error rule: one function that the sweep (to stop) and the analysis both call.

A stage whose failed requests are more than ``limit_pct`` % of its requests is the red line
(:data:`loadknee_core.contract.RED_LINE_ERROR_PCT` is the shared default; 0 makes any error the
red line, 100 none, since no share is above 100 %). The sweep asks it after each stage with the
counts it kept (:class:`loadknee_locust.sweep.schedule.RedLine`); the analysis asks it per stage
of the record table (:func:`analysis.knee.signals.error_signals`). Both going through this one
function is what makes the sweep stop exactly at the stage the analysis calls the red line.

Stdlib only, like :mod:`loadknee_core.knee_params`: the Locust side imports it without pandas.
"""

from __future__ import annotations


def error_share_pct(*, requests: int, errors: int) -> float | None:
    """Failed requests as a % of ``requests``; None when there was none."""
    return 100.0 * errors / requests if requests > 0 else None


def crosses_red_line(*, requests: int, errors: int, limit_pct: float) -> bool:
    """Whether ``errors`` of ``requests`` is an error share above ``limit_pct``."""
    share = error_share_pct(requests=requests, errors=errors)
    return share is not None and share > limit_pct
