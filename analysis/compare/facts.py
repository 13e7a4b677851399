"""What a comparison found, as typed facts: one frozen record per reading, its ``kind`` from a
closed vocabulary (:data:`ReadingKind`), the numbers with their units in the field names and
the threshold it was judged by.

:func:`analysis.compare.core.compare_runs` returns them (``Comparison.readings``) and
:mod:`analysis.report.compare_words` words them, so a test asserts on a ratio or a verdict and
only the golden file (``tests/support/data/golden/compare_words.txt``) pins the sentences.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from analysis.compare.prefix_cache import PrefixCacheChange

ReadingKind = Literal[
    "replay-unmarked",
    "replay-buffer",
    "replay-gap",
    "config-move",
    "config-check",
    "replicas-unknown",
    "replica-scaling",
    "batch-best",
    "batch-at-flight",
    "batch-advice",
    "prefix-gain",
    "prefix-cache-change",
]

#: below this replica efficiency a shared bottleneck is named (1.3× from 2 = 0.65)
SHARED_BOTTLENECK_EFFICIENCY = 0.8
#: below this peak tok/s ratio (with / without) the prefix cache brought little
LITTLE_PREFIX_GAIN = 1.05
#: the verdicts the recommended stage may have after a config change for the table to hold
HOLDING_VERDICTS: tuple[str, ...] = ("comfortable", "critical")

T = TypeVar("T")


@dataclass(frozen=True)
class Note:
    """A reading with no number of its own: run.json does not say which run replays the log (the
    first is read as the benchmark: ``replay-unmarked``), some replica count is unknown
    (``replicas-unknown``), or the standing advice on batch size against concurrency
    (``batch-advice``)."""

    kind: Literal["replay-unmarked", "replicas-unknown", "batch-advice"]


@dataclass(frozen=True)
class ReplayBuffer:
    """How many users the benchmark and the replay each stay below the knee (max concurrency)."""

    bench: str
    replay: str
    bench_max_users: int | None
    replay_max_users: int | None
    kind: ReadingKind = field(default="replay-buffer", init=False)

    @property
    def buffer_users(self) -> int | None:
        """The long-tail buffer: the benchmark's max concurrency less the replay's (None when
        either is unknown)."""
        if self.bench_max_users is None or self.replay_max_users is None:
            return None
        return self.bench_max_users - self.replay_max_users

    @property
    def buffer_pct(self) -> float | None:
        """The buffer in % of the benchmark's number (only when the replay's is lower)."""
        buffer = self.buffer_users
        if buffer is None or buffer <= 0 or not self.bench_max_users:
            return None
        return 100 * buffer / self.bench_max_users


@dataclass(frozen=True)
class ReplayGap:
    """At the highest common level within the replay's max concurrency: replay / benchmark."""

    users: int
    p99_ratio: float | None
    tok_s_ratio: float | None
    kind: ReadingKind = field(default="replay-gap", init=False)


@dataclass(frozen=True)
class Moved(Generic[T]):
    """One figure of the run before a config change and of the run after it (None: that run
    does not have it), so every figure a change moves is read and worded the same way."""

    before: T | None
    after: T | None


@dataclass(frozen=True)
class ConfigMove:
    """Before vs after a config change: the knee, max concurrency and peak output tok/s."""

    after: str
    knee_users: Moved[int]
    max_users: Moved[int]
    peak_tok_s: Moved[float]
    kind: ReadingKind = field(default="config-move", init=False)


@dataclass(frozen=True)
class ConfigCheck:
    """The after run's verdict at the before run's recommended max concurrency."""

    after: str
    users: int
    tested: bool
    verdict: str | None  # the stage's verdict kind (None: not tested, or no verdict)
    holding: tuple[str, ...] = HOLDING_VERDICTS
    kind: ReadingKind = field(default="config-check", init=False)

    @property
    def holds(self) -> bool | None:
        """Whether the table holds after the change (None: the level was not tested)."""
        return self.verdict in self.holding if self.tested else None


@dataclass(frozen=True)
class ReplicaScaling:
    """N replicas against the fewest: efficiency = X_N / (X_1 × N / N_1) on peak output tok/s."""

    label: str
    replicas: int
    base_replicas: int
    peak_tok_s: float | None
    base_peak_tok_s: float | None
    efficiency: float | None  # None: no throughput to compare
    threshold: float = SHARED_BOTTLENECK_EFFICIENCY
    kind: ReadingKind = field(default="replica-scaling", init=False)

    @property
    def shared_bottleneck(self) -> bool | None:
        return None if self.efficiency is None else self.efficiency < self.threshold


@dataclass(frozen=True)
class FlightPoint:
    """One run's stage: its output tok/s and e2e P50."""

    label: str
    tok_s: float | None
    e2e_p50_ms: float | None


@dataclass(frozen=True)
class BatchBest(FlightPoint):
    """A run's best output tok/s stage, with its batch size, users and prompts in flight."""

    batch_size: int
    users: int
    in_flight: int
    kind: ReadingKind = field(default="batch-best", init=False)


@dataclass(frozen=True)
class BatchAtFlight:
    """Every run's stage at the same number of prompts in flight."""

    in_flight: int
    points: tuple[FlightPoint, ...]
    kind: ReadingKind = field(default="batch-at-flight", init=False)


@dataclass(frozen=True)
class PrefixGain:
    """With (``on``) vs without (``off``) the prefix cache: peak tok/s and TTFT P50 ratios."""

    on: str
    off: str
    peak_tok_s_ratio: float | None
    ttft_users: int | None  # the middle common level (None: no common level)
    ttft_p50_ratio: float | None
    knee_users_off: int | None
    knee_users_on: int | None
    threshold: float = LITTLE_PREFIX_GAIN
    kind: ReadingKind = field(default="prefix-gain", init=False)

    @property
    def little_gain(self) -> bool:
        return self.peak_tok_s_ratio is not None and self.peak_tok_s_ratio < self.threshold


@dataclass(frozen=True)
class PrefixChange:
    """The prefix cache's change with its intervals (:mod:`analysis.compare.prefix_cache`)."""

    change: PrefixCacheChange
    kind: ReadingKind = field(default="prefix-cache-change", init=False)


Reading = (
    Note
    | ReplayBuffer
    | ReplayGap
    | ConfigMove
    | ConfigCheck
    | ReplicaScaling
    | BatchBest
    | BatchAtFlight
    | PrefixGain
    | PrefixChange
)
