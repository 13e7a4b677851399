"""The names of the method's rules, as ``docs/method.md`` titles them: one spelling everywhere.

Every user-facing text (reasons, recommendations, the report, help) that names a rule takes the
name from :data:`RULES` through :func:`cite`, so a reader can look the rule up in
``docs/method.md``; a test checks that each name is a heading there and that every
``(rule: …)`` in the outputs is one of them.
"""

from __future__ import annotations

#: rule key → its heading in docs/method.md
RULES: dict[str, str] = {
    "sweep": "Stepped sweep",
    "fixed_lengths": "Fixed prompt lengths",
    "replay": "Replayed prompt log",
    "baseline": "Single-user baseline",
    "spread": "Baseline spread",
    "per_1k": "Seconds per 1k tokens",
    "flattening": "Throughput flattening",
    "narrowing": "Gain narrowing",
    "tail": "Tail departure",
    "sla": "Latency SLA",
    "memory": "Memory pressure",
    "oom": "Out of memory",
    "errors": "Errors",
    "client": "Client-bound stage",
    "dip": "Dip, not knee",
    "refine": "Refinement between levels",
    "early_stop": "Early stop",
    "intervals": "Stage intervals",
    "noisy": "Noisy stage",
    "saturation": "Server saturation",
    "client_queue": "Queueing seen from the client",
    "stage_validity": "Stage validity",
    "knee_fit": "Knee from all stages",
    "slo_capacity": "SLO capacity",
    "goodput": "Goodput",
    "knee": "Knee",
    "red_line": "Red line",
    "insufficient_data": "Insufficient data",
    "client_limit": "Client limit",
    "memory_full": "Memory full",
    "failing": "Failing stage",
    "gpu_idle": "GPU idle",
    "server_queue": "Server queue",
    "prefill": "Slow prefill",
    "kv_contention": "KV-cache contention",
    "compute": "Compute saturated",
    "stuck": "Throughput stuck",
    "closed_loop": "Closed-loop wait",
    "memory_leading": "Memory leading",
    "interference": "Interference",
    "deploy": "The answer to deploy",
    "max_concurrency": "Max concurrency",
    "base_capacity": "Base capacity",
    "watermark": "Production watermark",
    "queue_timeout": "Queue timeout",
    "request_timeout": "Request timeout",
    "max_num_seqs": "Concurrency cap",
    "gpu_memory_utilization": "GPU memory utilisation",
    "max_model_len": "Context length",
    "replicas": "Replicas",
    "all_failed": "All requests failed",
    "small_stage": "Small stage",
    "late_client": "Late load generator",
    "shared_host": "Shared host",
    "total_failure": "Total failure stop",
    "cut_short": "Cut-short run",
    "missing_rows": "Missing rows",
}

#: how a rule is cited in a text; the test reads citations back with this prefix
CITE_PREFIX = "rule: "


def name(key: str) -> str:
    """The rule's heading in docs/method.md (KeyError for an unknown key: a typo fails loudly)."""
    return RULES[key]


def cite(key: str) -> str:
    """``(rule: Heading)``, the form every output uses to name the rule behind a figure."""
    return f"({CITE_PREFIX}{RULES[key]})"
