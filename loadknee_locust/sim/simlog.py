"""Server-side truth for tests: one record per HTTP generation request, in a bounded ring buffer.

``GET /sim/log`` returns the records (oldest first); ``GET /sim/stats`` the outcome counters.
Fields of a record: ``request_id`` (the client's ``X-Request-Id`` header when sent, else
generated), ``endpoint`` (``chat`` | ``completions``), ``stream``, ``status`` (HTTP),
``outcome`` (:data:`SIM_OUTCOMES`), ``arrival_unix_s``, ``first_token_unix_s`` (streaming: when
the first content chunk was written to the socket; otherwise when the engine produced the first
token; None when none was), ``end_unix_s`` (last byte written), ``prompt_tokens``,
``completion_tokens``, ``preemptions``, ``fault`` (the injected fault's mode, or ""),
``cached_tokens`` (prompt tokens the prefix cache spared; None when not admitted).
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal, get_args

SimOutcome = Literal[
    "ok",  # served completely
    "rejected",  # 429/503: waiting queue full, or the engine restarting
    "too_long",  # 400: prompt + max_tokens > max_model_len
    "cut",  # in flight when the engine crashed: stream ended without [DONE] / 500
    "bad_request",  # other 4xx: malformed JSON, wrong shape, unknown model
    "aborted",  # the client went away mid-response
    "faulted",  # a fault injected on purpose (``fault`` says which; sim/faults.py)
]
SIM_OUTCOMES: Final[tuple[str, ...]] = get_args(SimOutcome)
DEFAULT_CAPACITY: Final = 200_000


@dataclass(frozen=True, slots=True)  # slots: 200k of them stay small
class SimRecord:
    request_id: str
    endpoint: str
    stream: bool
    status: int
    outcome: SimOutcome
    arrival_unix_s: float
    first_token_unix_s: float | None
    end_unix_s: float
    prompt_tokens: int | None
    completion_tokens: int | None
    preemptions: int
    fault: str = ""  # the injected fault's mode, "" when none
    cached_tokens: int | None = None  # prompt tokens found in the prefix cache


class SimLog:
    """Ring buffer of :class:`SimRecord` plus a counter per outcome (counters never roll)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.records: deque[SimRecord] = deque(maxlen=capacity)
        self.outcomes: Counter[str] = Counter({o: 0 for o in SIM_OUTCOMES})

    def add(self, record: SimRecord) -> None:
        self.records.append(record)
        self.outcomes[record.outcome] += 1

    def as_json(self, last: int | None = None) -> list[dict[str, Any]]:
        records = list(self.records)
        if last is not None:
            records = records[-last:] if last > 0 else []
        return [asdict(r) for r in records]
