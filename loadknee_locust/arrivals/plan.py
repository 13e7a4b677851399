"""When each open-loop request is meant to go out: rate stages and a log's arrival times (pure).

No locust, no clock: every function takes its inputs and returns send offsets in seconds from
an anchor (the stage's start), so each rule is tested table-driven without sleeping.

* **Rate stages** (``--llm-rates 1,2,4,8``): each stage offers ``rate`` requests/s for its whole
  length. ``constant`` sends every ``1/rate`` s from the anchor; ``poisson`` draws exponential
  gaps (inter-arrival CV 1); ``gamma`` draws gamma gaps of shape ``b`` (``--llm-burstiness``)
  and mean ``1/rate``, so the CV is ``1/sqrt(b)``: ``b < 1`` bursty, ``b = 1`` Poisson,
  ``b > 1`` smoother (the load model of vLLM's ``benchmark_serving``). The draws are seeded by
  ``(seed, stage)``: the same options give the same schedule in every run and every process.
* **Arrival replay** (``--llm-arrival-log``): each logged request goes out at its logged start
  minus the first one's, divided by ``--llm-time-scale`` (60: an hour in a minute), with its
  logged input and output lengths; unordered starts are sorted (and counted).
* **Workers** (``--workers N``): one schedule for the whole run, split by position: worker
  ``k`` of ``N`` sends arrivals ``k, k+N, k+2N, ...`` (no request twice, none lost), and holds
  its share of ``--llm-max-in-flight``.

Every schedule starts :data:`LEAD_S` after its anchor: the dispatcher is spawned by the tick
that opened the stage, so an arrival planned at the anchor itself would always be late.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the options (and the arrival processes' names, --llm-arrivals) sit above
    from loadknee_locust.plugin.options import ArrivalProcess, LlmOptions

#: seconds between a stage's start and its first planned send
LEAD_S = 0.5


@dataclass(frozen=True)
class Arrival:
    """One planned request: its send offset (s from the anchor) and its logged lengths."""

    offset_s: float
    input_tokens: int | None = None
    output_tokens: int | None = None


def parse_rates(text: str) -> tuple[float, ...]:
    """``"1,2,4.5"`` → ``(1.0, 2.0, 4.5)``; every rate a finite number > 0 (requests/s)."""
    try:
        rates = tuple(float(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise ValueError(f"--llm-rates must be comma-separated numbers, got {text!r}") from None
    if not rates or any(not (math.isfinite(r) and r > 0) for r in rates):
        raise ValueError(f"--llm-rates needs at least one rate, each > 0, got {text!r}")
    return rates


def gaps(
    rate: float, process: ArrivalProcess, *, burstiness: float = 1.0, rng: random.Random
) -> Iterator[float]:
    """Inter-arrival gaps (s) of ``process`` at ``rate`` requests/s, without end."""
    if not rate > 0:
        raise ValueError("the rate must be > 0")
    mean = 1.0 / rate
    if process == "constant":
        while True:
            yield mean
    if process == "poisson":
        while True:
            yield rng.expovariate(rate)
    if process == "gamma":
        if not burstiness > 0:
            raise ValueError("--llm-burstiness must be > 0")
        while True:
            yield rng.gammavariate(burstiness, mean / burstiness)
    raise ValueError(f"unknown arrival process {process!r}")


def stage_seed(seed: int, stage: int) -> int:
    """The draws of one stage: the same for every process and every run with these options."""
    return seed * 1_000_003 + stage


def rate_offsets(
    rate: float,
    duration_s: float,
    process: ArrivalProcess,
    *,
    burstiness: float = 1.0,
    seed: int = 0,
    lead_s: float = LEAD_S,
) -> list[float]:
    """Send offsets in ``[lead_s, duration_s)`` for one stage: the first at ``lead_s`` when
    constant, one random gap after it otherwise (a Poisson stream has no arrival at 0)."""
    rng = random.Random(seed)
    out: list[float] = []
    t = lead_s
    stream = gaps(rate, process, burstiness=burstiness, rng=rng)
    if process != "constant":
        t += next(stream)
    while t < duration_s:
        out.append(t)
        t += next(stream)
    return out


def log_arrivals(
    records: Iterable[tuple[float, int | None, int | None]],
    *,
    time_scale: float = 1.0,
    lead_s: float = LEAD_S,
) -> tuple[list[Arrival], int]:
    """(start s, input tokens, output tokens) per logged request → arrivals sorted by time,
    offsets from the first start divided by ``time_scale``; and how many came out of order."""
    if not time_scale > 0:
        raise ValueError("--llm-time-scale must be > 0")
    rows = list(records)
    unordered = sum(1 for a, b in itertools.pairwise(rows) if b[0] < a[0])
    rows.sort(key=lambda r: r[0])
    if not rows:
        return [], 0
    first = rows[0][0]
    arrivals = [
        Arrival(lead_s + (start - first) / time_scale, inp, out) for start, inp, out in rows
    ]
    return arrivals, unordered


def share(items: list[Arrival], worker: int, workers: int) -> list[Arrival]:
    """Worker ``worker``'s part of one schedule: every ``workers``-th arrival from ``worker``."""
    if workers <= 1:
        return items
    if not 0 <= worker < workers:
        raise ValueError(f"worker {worker} is not one of {workers}")
    return items[worker::workers]


def cap_share(cap: int, worker: int, workers: int) -> int:
    """Worker ``worker``'s part of ``--llm-max-in-flight`` (the parts add up to ``cap``; each at
    least 1)."""
    if workers <= 1:
        return cap
    return max(1, cap // workers + (1 if worker < cap % workers else 0))


@dataclass(frozen=True)
class OpenLoopPlan:
    """The open-loop options, checked: rate stages, or one arrival-replay stage."""

    rates: tuple[float, ...]
    process: ArrivalProcess
    burstiness: float
    max_in_flight: int
    arrival_log: str
    time_scale: float
    seed: int
    stage_seconds: float = 0.0  # rate stages: each stage's length, warm-up included

    @property
    def replay(self) -> bool:
        return bool(self.arrival_log)

    @classmethod
    def from_options(cls, options: LlmOptions) -> OpenLoopPlan:
        rates = parse_rates(options.rates) if options.rates else ()
        if not rates and not options.arrival_log:
            raise ValueError("open-loop load needs --llm-rates or --llm-arrival-log")
        if rates and options.arrival_log:
            raise ValueError("--llm-rates and --llm-arrival-log exclude each other")
        if options.max_in_flight < 1:
            raise ValueError("--llm-max-in-flight must be >= 1")
        if not options.burstiness > 0:
            raise ValueError("--llm-burstiness must be > 0")
        if not options.time_scale > 0:
            raise ValueError("--llm-time-scale must be > 0")
        from loadknee_locust.sweep.schedule import parse_stage_length

        seconds = parse_stage_length(options.stage_seconds, "--llm-stage-seconds")
        if rates and (seconds is None or str(options.stage_requests).strip() not in ("", "0")):
            raise ValueError("rate stages are timed: give --llm-stage-seconds a number")
        return options.part(
            cls, stage_seconds=seconds or 0.0, rates=rates, process=options.arrivals
        )

    def stage_arrivals(self, step: int, duration_s: float) -> list[Arrival]:
        """The arrivals of rate stage ``step`` (0 = the first rate) over ``duration_s``."""
        offsets = rate_offsets(
            self.rates[step],
            duration_s,
            self.process,
            burstiness=self.burstiness,
            seed=stage_seed(self.seed, step),
        )
        return [Arrival(t) for t in offsets]
