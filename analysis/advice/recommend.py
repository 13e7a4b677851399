"""Turn the verdicts into deployment settings, each with its reason as a typed fact.

Rules (each a heading of docs/method.md, cited in its reason through :mod:`analysis.rules`):

* ``max_concurrency`` — the stage before the knee ("if the knee is at 8, write 4");
* ``base_capacity`` and ``production_watermark`` — the highest stage with the tail in SLA,
  memory at or under ``--knee-memory-pct`` and 100 % success, then plan at
  ``watermark_low``–``watermark_high`` (``--watermark-low``/``--watermark-high``, 70–80 %)
  of it (capacity 24 → promise 16–19);
* ``interactive_max_concurrency`` keeps that margin; ``offline_batch_max_concurrency`` may run at
  the knee when the knee stage itself was clean (all served, memory under the OOM risk);
* ``queue_timeout_ms`` — the baseline P95 × ``queue_timeout_margin``, rounded up;
* ``request_timeout_ms`` — the longest output at the knee's per-token rate (TTFT P95 + tokens ×
  TPOT P95, else the median seconds per 1k completion tokens scaled by the stage's P99/P50),
  × ``request_timeout_margin``;
* ``vllm.max_num_seqs`` — max_concurrency × batch size, only when a knee or red line was found
  in the tested range (a cap from a server that never saturated would cap it below what it can
  do: the advice is then to sweep higher, with the command); past it vLLM queues instead of
  running out of memory;
* ``vllm.gpu_memory_utilization`` — lowered by ``gpu_memory_utilization_step`` only when memory
  led the failure (OOM or OOM risk at the knee / red line);
* ``vllm.max_model_len`` — the replayed log's longest real context × ``max_model_len_headroom``
  (1.25), rounded up to a power of two; only for a log of ``min_log_records`` (1000) requests or
  more, else withheld with the reason (a short limit answers longer requests with HTTP 400);
* ``replicas`` — ``ceil(target_concurrency / (watermark_high_users × replica_efficiency))``.

Nothing at all when no stage could be judged (every one "insufficient data"). Each reason and
each setting withheld is a record of :mod:`analysis.advice.facts`, worded by
:mod:`analysis.report.advice_words`; recommendations.yaml is written by
:mod:`analysis.report.advice_yaml`.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, replace
from typing import Any, Literal

import pandas as pd

from analysis.advice import facts
from analysis.advice.deploy import deploy_answer, memory_pressure_pct
from analysis.advice.engine import CAPS, KV_POOL_KEY, RUN_INFO_KEY
from analysis.knee.find import LOG_SOURCE_KINDS
from analysis.knee.refusal_signal import refusal_limit
from analysis.model import Baseline, KneeResult
from analysis.stages.levels import level_rows
from loadknee_core.flags import add_flags, flag, given_values
from loadknee_core.numeric import num

#: vLLM's default --gpu-memory-utilization, assumed when the run does not say
VLLM_DEFAULT_GPU_MEMORY_UTILIZATION = 0.9


@dataclass(frozen=True)
class RecommendParams:
    """Margins and targets of :func:`recommend` (see the module docstring)."""

    watermark_low: float = flag(
        0.7, "production watermark, low end (default %(default)s)", spelling="--watermark-low"
    )
    watermark_high: float = flag(
        0.8, "production watermark, high end (default %(default)s)", spelling="--watermark-high"
    )
    queue_timeout_margin: float = flag(
        3.0,
        "queue_timeout_ms = baseline P95 × this (default %(default)s)",
        spelling="--queue-timeout-margin",
    )
    request_timeout_margin: float = flag(
        1.5,
        "margin on the longest output's time (default %(default)s)",
        spelling="--request-timeout-margin",
    )
    round_ms: int = 1000
    target_concurrency: int | None = flag(
        None, "concurrency to serve: recommend a replica count", spelling="--target-concurrency"
    )
    #: throughput(N) / (N × one replica), measured
    replica_efficiency: float | None = flag(
        None,
        "measured throughput of N replicas / (N × one), e.g. 0.65",
        spelling="--replica-efficiency",
    )
    #: the server's current value, when known
    gpu_memory_utilization: float | None = flag(
        None, "the server's current --gpu-memory-utilization", spelling="--gpu-memory-utilization"
    )
    gpu_memory_utilization_step: float = 0.05
    min_log_records: int = 1000  # a smaller replayed log cannot speak for production's longest
    max_model_len_headroom: float = 1.25

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> None:
        """Add the recommendation options (defaults from this class) to an argparse parser."""
        add_flags(parser, RecommendParams, prefix="rec_", title="recommendations")

    @classmethod
    def from_cli_args(cls, ns: argparse.Namespace) -> RecommendParams:
        return cls(**given_values(ns, cls, prefix="rec_"))


def _section(info: dict[str, Any], key: str) -> dict[str, Any]:
    value = info.get(key)
    return value if isinstance(value, dict) else {}


def _round_up(ms: float, step: int) -> int:
    return int(math.ceil(ms / step) * step)


def _stage_row(summary: pd.DataFrame, stage: int | None) -> pd.Series | None:
    if stage is None:
        return None
    match = summary[summary["stage"] == stage]
    return match.iloc[0] if len(match) else None


def _users_row(summary: pd.DataFrame, users: int | None) -> pd.Series | None:
    if users is None:
        return None
    levels = level_rows(summary)
    match = levels[levels["target_users"] == users]
    return match.iloc[0] if len(match) else None


def watermark_band(users: int, p: RecommendParams) -> tuple[int, int]:
    """The production watermark's users, ``watermark_low``–``watermark_high`` of ``users`` (the
    base capacity; the cluster files' stand-in passes ``max_concurrency``), at least 1 each."""
    return max(1, math.floor(users * p.watermark_low)), max(1, math.floor(users * p.watermark_high))


def _capacity_items(knee: KneeResult, p: RecommendParams) -> list[facts.Recommendation]:
    items = []
    if knee.knee_users is not None:
        why = facts.MaxConcurrencyFact("before_knee", knee.knee_users)
    elif knee.red_line_users is not None:
        why = facts.MaxConcurrencyFact("before_red_line", knee.red_line_users)
    else:
        why = facts.MaxConcurrencyFact("untested_limit")
    items.append(facts.Recommendation("max_concurrency", knee.max_concurrency, why))
    base = knee.base_capacity
    items.append(
        facts.Recommendation(
            "base_capacity",
            base,
            facts.BaseCapacityFact(base is not None, memory_pressure_pct(knee)),
        )
    )
    if base is not None:
        low, high = watermark_band(base, p)
        items.append(
            facts.Recommendation(
                "production_watermark",
                [low, high],
                facts.WatermarkFact("watermark", p.watermark_low, p.watermark_high, base),
            )
        )
        items.append(
            facts.Recommendation(
                "interactive_max_concurrency",
                high,
                facts.WatermarkFact("interactive", p.watermark_low, p.watermark_high, base),
            )
        )
    return items


def _offline_item(summary: pd.DataFrame, knee: KneeResult) -> facts.Recommendation | None:
    row = _stage_row(summary, knee.knee_stage)
    signals = {}
    if knee.knee_stage is not None:
        verdict = next(v for v in knee.stages if v.stage == knee.knee_stage)
        signals = {s.name: s.fired for s in verdict.signals}
    if row is not None and not signals.get("errors") and not signals.get("oom_risk"):
        return facts.Recommendation(
            "offline_batch_max_concurrency",
            knee.knee_users,
            facts.OfflineFact("at_knee", knee.knee_users),
        )
    if knee.max_concurrency is None:
        return None
    return facts.Recommendation(
        "offline_batch_max_concurrency",
        knee.max_concurrency,
        facts.OfflineFact("knee_unclean" if row is not None else "no_knee", knee.knee_users),
    )


def _queue_timeout(baseline: Baseline, p: RecommendParams) -> facts.Recommendation | None:
    figures: tuple[tuple[Literal["P95", "P99", "median"], float | None], ...] = (
        ("P95", baseline.e2e_p95_ms),
        ("P99", baseline.e2e_p99_ms),
        ("median", baseline.e2e_p50_ms),
    )
    for name, value in figures:
        if value is not None:
            ms = _round_up(value * p.queue_timeout_margin, p.round_ms)
            fact = facts.QueueTimeoutFact(name, value, p.queue_timeout_margin)
            return facts.Recommendation("queue_timeout_ms", ms, fact)
    return None


def _request_timeout(
    summary: pd.DataFrame, knee: KneeResult, run_info: dict[str, Any], p: RecommendParams
) -> facts.Recommendation | None:
    row = _stage_row(summary, knee.knee_stage) if knee.knee_stage is not None else None
    if row is None:
        row = _users_row(summary, knee.max_concurrency)
    if row is None:
        return None
    longest = (
        num(summary["completion_tokens_max"].max()) if "completion_tokens_max" in summary else None
    )
    target = num(run_info.get("max_output_tokens") or run_info.get("output_tokens"))
    longest = max(x for x in (longest, target, 0.0) if x is not None)
    if not longest:
        return None
    tpot, ttft = num(row.get("tpot_p95_ms")), num(row.get("ttft_p95_ms")) or 0.0
    per1k = num(row.get("s_per_1k_completion_tokens"))  # numerically ms per token
    users, margin = int(row["target_users"]), p.request_timeout_margin
    if tpot is not None:
        ms = ttft + longest * tpot
        fact = facts.RequestTimeoutFact("tpot", users, longest, ms, margin, ttft, tpot_p95_ms=tpot)
    elif per1k is not None:
        p50, p99 = num(row.get("e2e_p50_ms")), num(row.get("e2e_p99_ms"))
        tail = p99 / p50 if p50 and p99 else 1.0  # the median rate, scaled to the P99 request
        ms = longest * per1k * tail
        fact = facts.RequestTimeoutFact(
            "per_token", users, longest, ms, margin, ms_per_token=per1k, tail_ratio=tail
        )
    else:
        return None
    return facts.Recommendation("request_timeout_ms", _round_up(ms * margin, p.round_ms), fact)


def _memory_led(knee: KneeResult) -> bool:
    limits = {knee.knee_stage, knee.red_line_stage} - {None}
    for verdict in knee.stages:
        if verdict.stage in limits:
            if verdict.bottleneck == "memory":
                return True
            if any(s.fired and s.name in ("oom", "oom_risk") for s in verdict.signals):
                return True
    return False


def sweep_higher(knee: KneeResult, run_info: dict[str, Any]) -> tuple[str, tuple[int, ...]]:
    """The host and the ``loadknee run`` levels that continue a sweep that never saturated the
    server (``URL`` where the run did not record its host)."""
    top = max((v.target_users for v in knee.judged), default=1)
    host = str(run_info.get("host") or run_info.get("target_url") or "URL")
    return host, tuple(top * k for k in (1, 2, 3, 4))


def _max_num_seqs(
    summary: pd.DataFrame, knee: KneeResult, run_info: dict[str, Any]
) -> tuple[facts.Recommendation | None, facts.WithheldFact | None]:
    """The cap, only from evidence: a knee or red line inside the tested range."""
    if knee.max_concurrency is None:
        return None, None
    if refusal_limit(knee) is not None:
        # the server turns requests away past its own limit: a lower cap only gives capacity away
        return None, facts.WithheldFact("refuses", cap=knee.max_concurrency)
    if knee.knee_stage is None and knee.red_line_stage is None:
        top = max((v.target_users for v in knee.judged), default=knee.max_concurrency)
        host, levels = sweep_higher(knee, run_info)
        return None, facts.WithheldFact("not_saturated", top_users=top, host=host, levels=levels)
    row = _users_row(summary, knee.max_concurrency)
    batch = int(num(row.get("batch_size")) or 1) if row is not None else 1
    limit: Literal["knee", "red_line"] = "knee" if knee.knee_users is not None else "red_line"
    limit_users = knee.knee_users if knee.knee_users is not None else knee.red_line_users
    # a library call without a run directory keeps the vLLM spelling; an analysed run says
    # which engine its metrics named (None: no /metrics, the number only)
    engine = run_info.get(RUN_INFO_KEY, "vllm")
    cap = knee.max_concurrency * batch
    own = _own_limit(summary, knee, run_info.get(KV_POOL_KEY))
    if engine not in CAPS:
        slots = own.slots if own is not None else None
        return None, facts.WithheldFact("unknown_engine", slots=slots, cap=cap)
    flag, key = CAPS[engine].flag, CAPS[engine].key
    if own is not None:
        own_fact = replace(own, flag=flag)
        return facts.Recommendation(key, own.predicted, own_fact), None
    current = num(_section(run_info, "server").get("slots"))  # what the server said it runs
    if current is not None and int(current) == cap:
        return None, facts.WithheldFact("already_at_cap", cap=cap, flag=flag)
    fact = facts.CapFact(knee.max_concurrency, limit, limit_users, batch)
    return facts.Recommendation(key, cap, fact), None


def _own_limit(
    summary: pd.DataFrame, knee: KneeResult, pool_tokens: Any = None
) -> facts.OwnLimitFact | None:
    """The fact (its flag left for the caller) when the knee is the server's own concurrency
    limit — it ran ``server_slots`` at once while requests waited — and the KV cache stayed
    well below pressure (at most 85 % of the memory-pressure threshold): raising the limit, not
    setting it to what it already is, is the fix. None otherwise (or KV unknown).

    The value to try: where the engine stated its KV pool (``pool_tokens``), the requests of
    the run's longest length (prompt + completion) that fit in the pool at the pressure
    threshold, which is the same for every run of one server and workload; else the slots
    scaled by the pressure threshold over the KV gauge's peak, which moves with when the
    samples fell (a short run's peak misses the fullest moment: 43 on one run, 74 on the
    next)."""
    slots = knee.server_slots
    if slots is None or knee.knee_stage is None or "kv_cache_peak_pct" not in summary:
        return None
    steps = level_rows(summary)
    kv = num(steps["kv_cache_peak_pct"].max())
    pressure = memory_pressure_pct(knee)
    if kv is None or kv <= 0 or kv >= 0.85 * pressure:
        return None
    longest = _longest_request(steps)
    pool = int(pool_tokens) if isinstance(pool_tokens, int | float) and pool_tokens > 0 else None
    predicted = int(pool * pressure / 100.0 / longest) if pool and longest else 0
    if predicted <= slots:  # no pool, or a log's longest request would not fit more: the gauge
        pool, predicted = None, int(slots * pressure / kv)
    if predicted <= slots:
        return None
    return facts.OwnLimitFact(
        "", slots, kv, predicted, pressure, pool_tokens=pool,
        request_tokens=longest if pool is not None else None,
    )  # fmt: skip


def _longest_request(steps: pd.DataFrame) -> float | None:
    """Prompt + completion tokens of the level stages' longest request (None: not counted)."""
    if "prompt_tokens_max" not in steps or "completion_tokens_max" not in steps:
        return None
    total = num((steps["prompt_tokens_max"] + steps["completion_tokens_max"]).max())
    return total if total is not None and total > 0 else None


def _max_model_len(
    summary: pd.DataFrame, run_info: dict[str, Any], p: RecommendParams
) -> tuple[facts.Recommendation | None, facts.WithheldFact | None]:
    """From a replayed log's longest context, only when the log is large enough to speak for
    production: a 20-line log's longest request says nothing about tomorrow's."""
    source = _section(run_info, "prompt_source")
    if str(source.get("kind", "")) not in LOG_SOURCE_KINDS:
        return None, None
    longest = num(source.get("max_context_tokens"))
    if longest is None and "prompt_tokens_max" in summary:
        prompt = num(summary["prompt_tokens_max"].max())
        output = num(summary["completion_tokens_max"].max())
        longest = None if prompt is None else prompt + (output or 0.0)
    if not longest:
        return None, None
    size = num(source.get("valid_records"))
    size = size if size is not None else num(source.get("records"))
    if size is None or size < p.min_log_records:
        return None, facts.WithheldFact(
            "small_log",
            records=size,
            min_records=p.min_log_records,
            longest_tokens=longest,
            rule="max_model_len",
        )
    length = 1 << max(10, math.ceil(math.log2(longest * p.max_model_len_headroom)))
    fact = facts.ModelLenFact(longest, size, p.max_model_len_headroom)
    return facts.Recommendation("vllm.max_model_len", length, fact), None


def _vllm_items(
    summary: pd.DataFrame, knee: KneeResult, run_info: dict[str, Any], p: RecommendParams
) -> tuple[list[facts.Recommendation], list[facts.WithheldFact]]:
    items: list[facts.Recommendation] = []
    notes: list[facts.WithheldFact] = []
    seqs, note = _max_num_seqs(summary, knee, run_info)
    items += [seqs] if seqs else []
    notes += [note] if note else []
    if _memory_led(knee):
        server = _section(run_info, "server")
        current = p.gpu_memory_utilization or num(server.get("gpu_memory_utilization"))
        assumed = current is None
        current = current or VLLM_DEFAULT_GPU_MEMORY_UTILIZATION
        lower = round(current - p.gpu_memory_utilization_step, 2)
        items.append(
            facts.Recommendation(
                "vllm.gpu_memory_utilization",
                lower,
                facts.GpuMemoryFact(current, assumed, lower),
            )
        )
    length, note = _max_model_len(summary, run_info, p)
    items += [length] if length else []
    notes += [note] if note else []
    return items, notes


def _replicas(knee: KneeResult, p: RecommendParams) -> facts.Recommendation | None:
    if p.target_concurrency is None or knee.base_capacity is None:
        return None
    per_replica = watermark_band(knee.base_capacity, p)[1]
    efficiency = p.replica_efficiency or 1.0
    count = max(1, math.ceil(p.target_concurrency / (per_replica * efficiency)))
    fact = facts.ReplicasFact(
        p.target_concurrency, per_replica, efficiency, bool(p.replica_efficiency)
    )
    return facts.Recommendation("replicas", count, fact)


def recommend(
    summary: pd.DataFrame,
    knee: KneeResult,
    baseline: Baseline,
    *,
    run_info: dict[str, Any] | None = None,
    params: RecommendParams | None = None,
) -> facts.Recommendations:
    """Settings from the knee: max_concurrency, watermark, timeouts, vLLM flags, replicas."""
    p = params or RecommendParams()
    info = run_info or {}
    if all(v.verdict == "insufficient_data" for v in knee.stages):
        return facts.Recommendations(items=(), server_flags=())  # no stage could be judged
    items = _capacity_items(knee, p)
    vllm, notes = _vllm_items(summary, knee, info, p)
    optional = [
        _offline_item(summary, knee),
        _queue_timeout(baseline, p),
        _request_timeout(summary, knee, info, p),
        *vllm,
        _replicas(knee, p),
    ]
    items += [item for item in optional if item is not None]
    flags = []
    for item in items:
        if item.key.partition(".")[0] in ENGINE_SECTIONS and item.value is not None:
            flags.append(flag_text(item))
    answer = deploy_answer(summary, knee)
    items = scoped_to_the_answer(items, answer)
    items.insert(0, facts.Recommendation("deploy_concurrency", answer.users, answer.fact))
    return facts.Recommendations(
        items=tuple(items), server_flags=tuple(flags), withheld=tuple(notes), deploy=answer
    )


def scoped_to_the_answer(
    items: list[facts.Recommendation], answer: facts.DeployAnswer
) -> list[facts.Recommendation]:
    """``items`` with a raise-the-slots fact told which figure it moves where the deploy answer
    is a soft knee's (nothing queued at the knee, the tail departed below it): the offline
    batch's, not the interactive one the tail set. Why: "DEPLOY 16" beside "the server's 40
    slots bind: raise --max-num-seqs toward ~72" read as if more slots would raise the 16; on a
    step that grows with the batch they raise the offline batch (38) only."""
    soft = answer.fact
    if not (
        isinstance(soft, facts.DeployFact)
        and soft.departed_users is not None
        and soft.batch_users is not None
    ):
        return items
    scoped = []
    for item in items:
        if isinstance(item.reason, facts.OwnLimitFact):
            reason = replace(
                item.reason, interactive_users=soft.users, offline_users=soft.batch_users
            )
            item = replace(item, reason=reason)
        scoped.append(item)
    return scoped


#: recommendation-key sections that are an engine's own flags
ENGINE_SECTIONS = ("vllm", "sglang", "tgi", "llamacpp")


def flag_text(item: facts.Recommendation) -> str:
    """``vllm.max_num_seqs`` → ``--max-num-seqs 24``; ``llamacpp.parallel`` → ``--parallel 8``."""
    return f"--{item.key.partition('.')[2].replace('_', '-')} {item.value}"
