"""The words of ``loadknee compare``'s reading: one line per fact of
:mod:`analysis.compare.facts`, for the screen and ``compare.md``.

The comparison decides (ratios, efficiency, the verdict at the recommended level); this module
only words what it found, with the report's number formats. The golden file
``tests/support/data/golden/compare_words.txt`` pins every sentence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from analysis.compare import facts
from analysis.compare.facts import Reading
from analysis.compare.prefix_cache import PrefixCacheChange
from analysis.model import VERDICT_LABELS
from loadknee_core.numeric import fmt_magnitude

#: why ``compare`` read the runs as their kind (:func:`analysis.compare.kind.detect_kind`'s order)
KIND_REASONS: dict[str, str] = {
    "benchmark-vs-replay": "one run replays a prompt log, the other uses fixed lengths",
    "replicas": "the runs have different replica counts",
    "batch": "the runs use different batch sizes",
    "prefix-cache": "the runs differ in prefix caching / shared prefix",
    "config": "same workload: read as before (first) vs after (later runs)",
}


def kind_reason_text(kind: str, chosen: bool) -> str:
    """Why the comparison is of ``kind``: named with ``--kind``, or what differed."""
    return "chosen with --kind" if chosen else KIND_REASONS[kind]


def _cache_pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.0f} %"


def _knee_users(users: int | None) -> str:
    return "no knee in range" if users is None else f"{users} users"


def prefix_change_text(change: PrefixCacheChange) -> str:
    """What the prefix cache bought, in one sentence (the screen's reading, prefix-cache.json)."""
    a, b = change.a, change.b
    if b.hit_pct is None:
        hit = f"'{b.label}' (the server exposes no prefix-cache counters: hit rate not measured)"
    else:
        hit = f"a hit rate of {b.hit_pct:.0f} % (vs {_cache_pct(a.hit_pct)} in '{a.label}')"
    if a.knee_users == b.knee_users:
        knee = f"left the knee at {_knee_users(a.knee_users)}"
    else:
        knee = f"moved the knee from {_knee_users(a.knee_users)} to {_knee_users(b.knee_users)}"
    conf = [c for c in (a.knee_confidence_pct, b.knee_confidence_pct) if c is not None]
    if len(conf) == 2:
        knee += f" (knee confidence {conf[0]:.0f} % / {conf[1]:.0f} %)"
    text = f"{hit} {knee}"
    chg = change.ttft_p95_change_pct
    if chg is not None:
        verb = "cut" if chg < 0 else "raised"
        text += f" and {verb} TTFT P95 at {change.ttft_level} users by {abs(chg):.0f} %"
        band = change.ttft_p95_change_pct_interval
        if band is not None:
            text += f" (95 % interval {band[0]:+.0f} % to {band[1]:+.0f} %)"
    if change.peak_tok_s_ratio is not None:
        text += f"; peak output tok/s ×{change.peak_tok_s_ratio:.2f}"
    return text + "."


def _x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def _replay_buffer(r: facts.ReplayBuffer) -> str:
    mb, mr = r.bench_max_users, r.replay_max_users
    line = (
        f"benchmark '{r.bench}' stays below the knee up to {mb} users, "
        f"replay '{r.replay}' up to {mr}"
    )
    if r.buffer_pct is not None:
        line += (
            f": the long-tail buffer is {r.buffer_users} users ({r.buffer_pct:.0f} % of "
            f"the benchmark's number). Promise the replay's {mr}, not {mb}."
        )
    elif r.buffer_users is not None:
        line += ": the real prompt mix is no harder than the benchmark here."
    return line


def _config_check(r: facts.ConfigCheck) -> str:
    if not r.tested:
        return f"'{r.after}' did not test {r.users} users: re-run with that level to verify."
    label = None if r.verdict is None else VERDICT_LABELS[r.verdict]
    head = f"at the recommended {r.users} users '{r.after}' is {label}: "
    if r.holds:
        return head + "the table holds after the change."
    return (
        head + "the change broke the table; do not deploy max_concurrency "
        f"{r.users} without re-tuning."
    )


def _replica_scaling(r: facts.ReplicaScaling) -> str:
    xn, x1 = r.peak_tok_s, r.base_peak_tok_s
    if r.efficiency is None or xn is None or x1 is None:
        return f"'{r.label}' ({r.replicas} replicas): no throughput to compare."
    text = (
        f"{r.replicas} replicas vs {r.base_replicas}: peak {fmt_magnitude(xn)} vs "
        f"{fmt_magnitude(x1)} tok/s = {xn / x1:.2f}× for {r.replicas / r.base_replicas:.0f}× "
        f"the replicas, efficiency {r.efficiency:.2f}"
    )
    if r.shared_bottleneck:
        return text + (
            " — a shared bottleneck (node network, storage I/O, a lock) eats the gain: "
            "more replicas are wasted money until it is found."
        )
    return text + " — near-linear: scale out with replicas rather than pushing one pod."


def _prefix_gain(r: facts.PrefixGain) -> str:
    text = f"'{r.on}' vs '{r.off}': peak tok/s {_x(r.peak_tok_s_ratio)}"
    if r.ttft_users is not None:
        text += f", TTFT P50 at {r.ttft_users} users {_x(r.ttft_p50_ratio)}"
    text += f"; knee {r.knee_users_off} → {r.knee_users_on} users."
    if r.little_gain:
        text += (
            " Little gain: the prompts share little prefix, or the cache is off "
            "(check the server's prefix-cache hit rate)."
        )
    return text


def _replay_gap(r: facts.ReplayGap) -> str:
    return (
        f"at {r.users} users the replay's P99 is {_x(r.p99_ratio)} and its "
        f"tok/s {_x(r.tok_s_ratio)} the benchmark's: that gap is what long prompts cost."
    )


def _config_move(r: facts.ConfigMove) -> str:
    return (
        f"knee moved from {r.knee_users.before} to {r.knee_users.after} users; "
        f"max concurrency {r.max_users.before} → {r.max_users.after}; "
        f"peak tok/s {fmt_magnitude(r.peak_tok_s.before)} → {fmt_magnitude(r.peak_tok_s.after)}."
    )


def _batch_best(r: facts.BatchBest) -> str:
    return (
        f"'{r.label}' (batch {r.batch_size}): best {fmt_magnitude(r.tok_s)} tok/s at {r.users} "
        f"users ({r.in_flight} prompts in flight), P50 {fmt_magnitude(r.e2e_p50_ms, 0.001)} s."
    )


def _batch_at_flight(r: facts.BatchAtFlight) -> str:
    parts = ", ".join(
        f"{p.label}: {fmt_magnitude(p.tok_s)} tok/s P50 {fmt_magnitude(p.e2e_p50_ms, 0.001)} s"
        for p in r.points
    )
    return f"at {r.in_flight} prompts in flight — {parts}."


#: the notes' words (a note has no number)
_NOTES = {
    "replay-unmarked": "run.json does not tell the replay apart: read as first = benchmark.",
    "replicas-unknown": "replica counts unknown: pass --replicas N1,N2,... (or 'replicas' in "
    "run.json)",
    "batch-advice": "offline batch jobs: prefer the larger batch size to fill the GPU; "
    "interactive traffic: raise concurrency and keep it under the knee; change one at a time.",
}
#: each reading's words, by its type
_WORDS: dict[type[Any], Callable[[Any], str]] = {
    facts.ReplayBuffer: _replay_buffer,
    facts.ReplayGap: _replay_gap,
    facts.ConfigMove: _config_move,
    facts.ConfigCheck: _config_check,
    facts.ReplicaScaling: _replica_scaling,
    facts.BatchBest: _batch_best,
    facts.BatchAtFlight: _batch_at_flight,
    facts.PrefixGain: _prefix_gain,
    facts.PrefixChange: lambda r: prefix_change_text(r.change),
}


def reading_line(reading: Reading) -> str:
    """One fact of the comparison in words."""
    if isinstance(reading, facts.Note):
        return _NOTES[reading.kind]
    return _WORDS[type(reading)](reading)


def reading_lines(readings: Iterable[Reading]) -> tuple[str, ...]:
    """The comparison's reading, one line per fact, in order."""
    return tuple(reading_line(r) for r in readings)
