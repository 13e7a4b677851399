"""Simulated GPU telemetry: memory in use and busy-time utilisation, from the engine's state.

Plausible rather than physical:

* memory: with KV pre-allocation, flat at ``gpu_memory_utilization × gpu_total_mib``; without it,
  ``weights + activations + kv_mib_per_token × KV tokens in use``; 0 during a cold restart (the
  process is gone);
* ``gpu_util_pct``: the fraction of the last second the engine spent inside steps (what
  nvidia-smi's "a kernel was running" utilisation means), so it is low while idle or waiting;
* ``sm_active`` (0–1): busy fraction weighted by batch occupancy (small batches leave SMs idle):
  ``0.25 + 0.75 × batch / max_num_seqs`` per step;
* ``dram_active`` (0–1): decode is memory-bound, so ``0.4 + 0.5 × batch / max_num_seqs`` per step;
  ``mem_copy_util_pct`` follows it (× 90);
* board power (W): ``power_idle_w + power_per_seq_w × running sequences`` at the moment of the
  scrape (:func:`power_w`), 0 during a cold restart — so every stage's tokens per joule is known
  from the running batch alone.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from loadknee_locust.sim.params import SimParams

WINDOW_S = 1.0


def memory_used_mib(params: SimParams, kv_tokens_in_use: int, *, up: bool = True) -> float:
    """Simulated GPU memory in use (MiB)."""
    if not up:
        return 0.0
    if params.kv_prealloc:
        return params.gpu_memory_utilization * params.gpu_total_mib
    return params.weights_mib + params.activation_mib + params.kv_mib_per_token * kv_tokens_in_use


def power_w(params: SimParams, running: int, *, up: bool = True) -> float:
    """Simulated board power draw (W): idle plus a fixed cost per running sequence."""
    if not up:
        return 0.0
    return params.power_idle_w + params.power_per_seq_w * running


def would_oom(params: SimParams, kv_tokens_in_use: int) -> bool:
    """Whether dynamic memory at this KV use passes the GPU total (and crashing is on)."""
    return (
        params.oom_crash
        and not params.kv_prealloc
        and memory_used_mib(params, kv_tokens_in_use) > params.gpu_total_mib
    )


@dataclass(frozen=True)
class Utilisation:
    gpu_util_pct: float
    sm_active: float
    dram_active: float

    @property
    def mem_copy_util_pct(self) -> float:
        return 90.0 * self.dram_active


@dataclass
class BusyWindow:
    """Engine steps of the last second: (start, end, occupancy 0–1), in monotonic seconds."""

    max_num_seqs: int
    steps: deque[tuple[float, float, float]] = field(default_factory=deque)

    def add(self, start: float, end: float, batch: int) -> None:
        self.steps.append((start, end, min(1.0, batch / self.max_num_seqs)))
        while self.steps and self.steps[0][1] < end - 2 * WINDOW_S:
            self.steps.popleft()

    def clear(self) -> None:
        self.steps.clear()

    def utilisation(self, now: float) -> Utilisation:
        lo = now - WINDOW_S
        busy = sm = dram = 0.0
        for start, end, occupancy in self.steps:
            overlap = min(end, now) - max(start, lo)
            if overlap > 0:
                busy += overlap
                sm += overlap * (0.25 + 0.75 * occupancy)
                dram += overlap * (0.4 + 0.5 * occupancy)
        return Utilisation(
            gpu_util_pct=min(100.0, 100.0 * busy / WINDOW_S),
            sm_active=min(1.0, sm / WINDOW_S),
            dram_active=min(1.0, dram / WINDOW_S),
        )
