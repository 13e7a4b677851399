"""Fault injection for the simulator: which requests misbehave, and how.

Why: a load tester is used exactly when servers misbehave, and its accounting (one row per
request, the right outcome, nothing doubled or hidden) can only be checked against a server that
misbehaves on purpose and counts what it did. ``--fault MODE --fault-share S`` makes a share
``S`` (0–1) of the generation requests that carry an ``X-Request-Id`` (the load; calibration
probes carry none and are never faulted) fail in one way; each faulted request is logged with
outcome ``faulted`` and its mode, so a test compares the simulator's count with the rows.

Modes and what a correct client records (streaming requests; non-streaming ones get the HTTP
modes only):

* ``http_500`` / ``http_503`` / ``http_429``: an error status with an OpenAI error body →
  ``http_error``;
* ``reset_before_read``: the connection is reset before the body is read (no headers sent) →
  ``connect_error``;
* ``reset_after_read``: the body is read, then the connection is reset → ``connect_error``
  (never resent: the server got it);
* ``cut_stream``: two tokens, then the stream ends without ``[DONE]`` → ``incomplete``;
* ``malformed_sse``: a ``data:`` line that is not JSON after the first token → ``malformed``;
* ``error_object``: an ``{"error": ...}`` event after the first token, then the end →
  ``stream_error``;
* ``stall``: the first token waits ``fault_stall_s`` (longer than the client's read timeout) →
  ``timeout``;
* ``trickle``: every token waits ``fault_trickle_s`` more, the stream completes → ``ok``;
* ``wrong_usage``: the usage chunk reports one completion token more → ``length_mismatch``.

``--fault-above-in-flight N`` limits the fault to requests that arrive while more than ``N`` of
the load's requests are in flight, so a stepped sweep meets it from a known level on (the fault
suite checks the red line lands there).
"""

from __future__ import annotations

import math
import random
from typing import Final

FAULT_MODES: Final[tuple[str, ...]] = (
    "none",
    "http_500",
    "http_503",
    "http_429",
    "reset_before_read",
    "reset_after_read",
    "cut_stream",
    "malformed_sse",
    "error_object",
    "stall",
    "trickle",
    "wrong_usage",
)
HTTP_FAULTS: Final = {"http_500": 500, "http_503": 503, "http_429": 429}
MALFORMED_EVENT: Final = b"data: {this is not json\n\n"
ERROR_EVENT: Final = (
    b'data: {"error": {"message": "simulated failure mid-stream", '
    b'"type": "InternalServerError", "code": 500}}\n\n'
)


class FaultPicker:
    """Decides, request by request, whether the configured fault applies.

    Why evenly spread rather than a coin per request: a short test stage sends a few dozen
    requests, and independent coins at share 0.25 leave long fault-free runs (seed 0 faults one
    of the first 35), so a check of "the faulted rows match the server's count" would sometimes
    see a single fault. Here exactly ``floor(n * share + phase)`` of the first ``n`` requests are
    faulted, one every ``1/share`` requests; the seeded ``phase`` decides where the first falls,
    so a run with the same seed faults the same positions."""

    def __init__(self, mode: str, share: float, seed: int, above_in_flight: int = 0) -> None:
        if mode not in FAULT_MODES:
            raise ValueError(f"unknown fault {mode!r}; choose from {', '.join(FAULT_MODES)}")
        if not 0.0 <= share <= 1.0:
            raise ValueError("fault_share must be between 0 and 1")
        self.mode = mode
        self.share = share
        self.above_in_flight = above_in_flight
        self._phase = random.Random(seed).random()
        self._seen = 0

    def pick(self, *, has_client_id: bool, in_flight: int = 0) -> str | None:
        """The fault for this request, or None.

        ``in_flight`` counts the load's requests being handled, this one included: with
        ``above_in_flight`` N > 0 only requests arriving while more than N are in flight are
        eligible (and only they move the count), like a server that sheds load past its
        capacity; a sweep then meets the fault from a known stage on."""
        if self.mode == "none" or self.share <= 0 or not has_client_id:
            return None
        if self.above_in_flight and in_flight <= self.above_in_flight:
            return None
        before = math.floor(self._seen * self.share + self._phase)
        self._seen += 1
        after = math.floor(self._seen * self.share + self._phase)
        return self.mode if after > before else None
