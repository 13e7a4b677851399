"""How long a user waits after a streak of failed requests: no hot loop against a failing target.

Why: a closed loop sends the next request as soon as the last one ends. Against a dead host, a
server that answers HTML 404 or a wrong model name, each request fails in well under a
millisecond, so one user sent ~800 requests/s for the whole sweep. The first
:data:`FREE_FAILURES` failures in a row cost nothing (a loaded server that rejects a few requests
is measured as it is); after that the pause doubles from :data:`FIRST_PAUSE_S` up to
:data:`MAX_PAUSE_S`, so a user sends at most about one request per ``MAX_PAUSE_S`` while every
request fails, and the first success resets it. Pure: the caller reports each outcome.
"""

from __future__ import annotations

FREE_FAILURES = 3
FIRST_PAUSE_S = 0.05
MAX_PAUSE_S = 1.0


class FailureBackoff:
    """Counts failures in a row; :meth:`after` gives the pause before the next request."""

    def __init__(self) -> None:
        self.in_a_row = 0

    def after(self, failed: bool) -> float:
        if not failed:
            self.in_a_row = 0
            return 0.0
        self.in_a_row += 1
        extra = self.in_a_row - FREE_FAILURES
        if extra <= 0:
            return 0.0
        return float(min(MAX_PAUSE_S, FIRST_PAUSE_S * 2 ** min(extra - 1, 16)))
