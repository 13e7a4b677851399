"""Test helper: a :class:`~analysis.predict.facts.CapacityFit` from hand-picked parameters, so
the prediction's tests (and its golden words) state only the parameters they are about."""

from __future__ import annotations

from analysis.predict.facts import (
    CapacityFit,
    CapacityParams,
    KvSource,
    PrefillSource,
    RunBound,
    Workload,
)


def synthetic_fit(
    params: CapacityParams,
    *,
    max_batch: float = 8.0,
    kv_source: KvSource = "none",
    prefill_source: PrefillSource = "baseline_assumed",
    kv_pct: float | None = None,
) -> CapacityFit:
    """A fit of a 256 + 64-token run on 1–16 users whose knee sat at 12 (capacity 8)."""
    return CapacityFit(
        run_id="synthetic",
        params=params,
        prefill_source=prefill_source,
        slot_source="server_gauge" if params.slots else "none",
        kv_source=kv_source,
        workload=Workload(256, 64),
        decode_points=5,
        decode_r2=0.99,
        kv_stage_users=16 if kv_pct is not None else None,
        kv_pct=kv_pct,
        max_batch=max_batch,
        max_users=16,
        measured_capacity=8,
        run_bound=RunBound("slots", 12, 8.0, None, params.slots, None),
        host="http://127.0.0.1:8000",
        levels=(1, 2, 4, 8, 12, 16),
    )
