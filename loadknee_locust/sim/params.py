"""The simulator's parameters (one frozen dataclass) and its named presets.

Every field is a ``loadknee sim`` flag (``--max-num-seqs 16``) that overrides the chosen preset;
each field's ``help`` metadata (with its unit) is what ``--help`` prints.

Memory model (see :mod:`.telemetry`): with ``kv_prealloc`` (vLLM's default) the simulated GPU
memory is flat at ``gpu_memory_utilization × gpu_total_mib`` from start-up; without it memory is
``weights_mib + activation_mib + kv_mib_per_token × KV tokens in use`` and, with ``oom_crash``,
passing ``gpu_total_mib`` crashes the engine, which restarts cold after ``restart_s``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Final


def _p(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class SimParams:
    """Everything that shapes the simulated server's behaviour (and so its knee)."""

    model: str = _p("sim-llm", "model id served by /v1/models and echoed in responses")
    max_num_seqs: int = _p(8, "running slots of the continuous batch (sequences)")
    kv_cache_tokens: int = _p(16384, "KV-cache budget: prompt + generated tokens of running seqs")
    max_model_len: int = _p(4096, "longest prompt + max_tokens accepted (tokens); longer → 400")
    kv_reserve_max_tokens: bool = _p(
        False,
        "admit a sequence only when prompt + max_tokens of every running one fits the KV budget "
        "(TGI/SGLang-style reservation: no preemption; the KV budget is a hard slot limit)",
    )
    max_num_batched_tokens: int = _p(
        2048, "tokens computed per step at most (chunked prefill; decodes count one each)"
    )
    max_waiting: int = _p(
        1024, "sequences that may wait beyond the free slots; more are rejected (0 = no queue)"
    )
    reject_status: int = _p(503, "HTTP status of a queue-full rejection (429 or 503)")
    prefill_ms_per_token: float = _p(
        0.02, "prefill cost per prompt token (ms), charged in the admitting step"
    )
    decode_base_ms: float = _p(10.0, "fixed cost of one engine step (ms)")
    decode_per_seq_ms: float = _p(0.5, "added step cost per running sequence (ms)")
    eos_mean_tokens: float = _p(
        256.0, "mean output length when ignore_eos is false (seeded geometric EOS); 0 = never"
    )
    chat_tokens_per_message: int = _p(3, "chat template overhead per message (tokens)")
    chat_tokens_constant: int = _p(3, "chat template overhead per request (tokens)")
    kv_prealloc: bool = _p(True, "vLLM-style KV pre-allocation: GPU memory flat from start-up")
    gpu_total_mib: float = _p(24576.0, "simulated GPU memory (MiB)")
    gpu_memory_utilization: float = _p(0.9, "fraction of GPU memory taken when pre-allocating")
    weights_mib: float = _p(13824.0, "model weights (MiB)")
    activation_mib: float = _p(1024.0, "activations/workspace while serving (MiB)")
    kv_mib_per_token: float = _p(0.5, "KV-cache memory per token (MiB)")
    oom_crash: bool = _p(False, "crash when dynamic memory passes gpu_total_mib (no prealloc)")
    restart_s: float = _p(2.0, "cold-restart time after a crash (s); 503 meanwhile")
    gpu_name: str = _p("Simulated GPU", "modelName label of the DCGM metrics")
    metrics: bool = _p(
        True, "serve GET /metrics; --no-metrics answers 404, like a server or gateway without it"
    )
    power_idle_w: float = _p(60.0, "simulated board power with nothing running (W)")
    power_per_seq_w: float = _p(20.0, "added board power per running sequence (W)")
    seed: int = _p(0, "seed for EOS positions and generated text (same seed → same run)")
    enable_prefix_caching: bool = _p(
        False, "vLLM-style automatic prefix caching: cached prompt blocks skip prefill"
    )
    block_size: int = _p(16, "tokens per KV block (the prefix cache hashes whole blocks)")
    fault: str = _p("none", "fault to inject (sim/faults.py lists the modes), e.g. http_503")
    fault_share: float = _p(0.0, "share (0-1) of the load's requests that get the fault")
    fault_stall_s: float = _p(5.0, "stall: seconds before the first token")
    fault_trickle_s: float = _p(0.05, "trickle: extra seconds before every token")
    fault_above_in_flight: int = _p(
        0, "fault only requests arriving while more than N of the load are in flight (0 = all)"
    )

    def __post_init__(self) -> None:
        problems = []
        if self.max_num_seqs < 1:
            problems.append("max_num_seqs must be ≥ 1")
        if self.max_model_len < 2:
            problems.append("max_model_len must be ≥ 2")
        if self.kv_cache_tokens < self.max_model_len:
            problems.append(
                f"kv_cache_tokens ({self.kv_cache_tokens}) must hold one max_model_len "
                f"({self.max_model_len}) sequence, as vLLM requires"
            )
        if self.max_num_batched_tokens < self.max_num_seqs:
            problems.append("max_num_batched_tokens must be ≥ max_num_seqs (one decode each)")
        if self.block_size < 1:
            problems.append("block_size must be ≥ 1")
        if self.reject_status not in (429, 503):
            problems.append("reject_status must be 429 or 503")
        if self.max_waiting < 0 or self.restart_s < 0:
            problems.append("max_waiting and restart_s must be ≥ 0")
        for name in (
            "prefill_ms_per_token",
            "decode_base_ms",
            "decode_per_seq_ms",
            "power_idle_w",
            "power_per_seq_w",
        ):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be ≥ 0")
        if self.decode_base_ms + self.decode_per_seq_ms <= 0:
            problems.append("a step must take some time (decode_base_ms + decode_per_seq_ms > 0)")
        from loadknee_locust.sim.faults import FAULT_MODES

        if self.fault not in FAULT_MODES:
            problems.append(f"fault must be one of {', '.join(FAULT_MODES)}")
        if not 0.0 <= self.fault_share <= 1.0 or self.fault_stall_s < 0 or self.fault_trickle_s < 0:
            problems.append("fault_share must be 0-1, fault_stall_s and fault_trickle_s ≥ 0")
        if self.fault_above_in_flight < 0:
            problems.append("fault_above_in_flight must be ≥ 0")
        if problems:
            raise ValueError("; ".join(problems))

    def replace(self, **overrides: Any) -> SimParams:
        """A copy with some fields changed (unknown names raise TypeError)."""
        return dataclasses.replace(self, **overrides)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: Named starting points. ``fast``: for tests, ~10–14 ms steps, saturates at 8 streams.
#: ``gpu-like``: a 7B model on one 24 GB GPU: ~15–25 ms steps, 48 slots, KV-limited below 48 for
#: long prompts (14336 tokens / (512 + 256) ≈ 18). ``kv-tight``: fast steps but a small KV cache,
#: so preemption shows past ~8 streams of 128 + 128. ``oom``: dynamic memory that crashes past the
#: GPU total (7168 KV tokens: 28 streams of 128 + 128 in step, up to ~37 when out of step) and
#: restarts cold. ``kv-bound``: no slot limit in range, but a sequence is admitted only when the
#: prompt + max_tokens of all running ones fit 4096 KV tokens: 21 streams of 128 + 64 (``loadknee
#: run``'s defaults), between the 16 and 24 levels. ``compute-bound``: no hard limit at all (512
#: slots, a large KV cache); each step costs 0.3 ms more per running sequence, so latency grows
#: steadily with the batch: the tail doubles near 32 users while throughput still grows at 64.
PRESETS: Final[dict[str, SimParams]] = {
    "fast": SimParams(),
    "gpu-like": SimParams(
        max_num_seqs=48,
        kv_cache_tokens=14336,
        max_model_len=4096,
        max_num_batched_tokens=8192,
        prefill_ms_per_token=0.05,
        decode_base_ms=15.0,
        decode_per_seq_ms=0.2,
        restart_s=20.0,
        gpu_name="NVIDIA L4 (simulated)",
    ),
    "kv-tight": SimParams(
        max_num_seqs=32,
        kv_cache_tokens=2048,
        max_model_len=1024,
    ),
    "oom": SimParams(
        max_num_seqs=64,
        kv_prealloc=False,
        oom_crash=True,
        gpu_total_mib=8192.0,
        weights_mib=4096.0,
        activation_mib=512.0,
        kv_mib_per_token=0.5,
        restart_s=3.0,
    ),
    "kv-bound": SimParams(
        max_num_seqs=64,
        kv_cache_tokens=4096,
        max_model_len=1024,
        kv_reserve_max_tokens=True,
    ),
    "compute-bound": SimParams(
        max_num_seqs=512,
        kv_cache_tokens=262144,
        max_model_len=4096,
        max_num_batched_tokens=65536,
        decode_per_seq_ms=0.3,
    ),
}
DEFAULT_PRESET: Final = "fast"


def preset(name: str, **overrides: Any) -> SimParams:
    """The named preset with ``overrides`` applied; unknown names raise ValueError."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    return PRESETS[name].replace(**overrides) if overrides else PRESETS[name]
