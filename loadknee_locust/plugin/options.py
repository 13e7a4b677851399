"""Every ``--llm-*`` command-line option of the plugin, registered on Locust's own parser.

One prefix for all (``--llm-``) so nothing clashes with locust-plugins; each option also reads an
environment variable (``LOADKNEE_<NAME>``) and ``locust.conf`` / ``[tool.locust]`` (Locust's
configargparse does that for us). The listener that calls :func:`add_arguments` fires several
times per process (the web UI rebuilds the parser on every page render), so this module only
declares arguments: no side effects.

Values are read back as ``environment.parsed_options.llm_<name>``.
"""

from __future__ import annotations

from typing import Any

DEFAULT_LEVELS = "1,2,4,8,16,24,32,48,64"


def _env(name: str) -> str:
    return "LOADKNEE_" + name.upper().replace("-", "_")


def add_arguments(parser: Any) -> None:
    """Add the plugin's options to a Locust (configargparse) parser, in named groups."""
    target = parser.add_argument_group("loadknee: target and requests")
    target.add_argument(
        "--llm-model",
        default="",
        env_var=_env("model"),
        help="Model name sent in every request (default: the first id from GET /v1/models).",
    )
    target.add_argument(
        "--llm-endpoint",
        default="chat",
        choices=["chat", "completions"],
        env_var=_env("endpoint"),
        help="OpenAI endpoint: /v1/chat/completions or /v1/completions.",
    )
    target.add_argument(
        "--llm-no-stream",
        action="store_true",
        default=False,
        env_var=_env("no_stream"),
        help="Send stream=false (e2e only, no TTFT/ITL). Default: stream with include_usage.",
    )
    target.add_argument(
        "--llm-temperature",
        type=float,
        default=0.0,
        env_var=_env("temperature"),
        help="Sampling temperature (default 0).",
    )
    target.add_argument(
        "--llm-extra-body",
        default="",
        env_var=_env("extra_body"),
        help="JSON object merged into every request body, e.g. '{\"top_p\": 1}'.",
    )
    target.add_argument(
        "--llm-api-key-env",
        default="OPENAI_API_KEY",
        env_var=_env("api_key_env"),
        help="Name of the environment variable holding the API key (the key itself is never "
        "written to any file, log or report).",
    )
    target.add_argument(
        "--llm-request-timeout",
        type=float,
        default=120.0,
        env_var=_env("request_timeout"),
        help="Seconds allowed for each socket read (longest prefill or inter-token gap).",
    )
    target.add_argument(
        "--llm-no-ignore-eos",
        action="store_true",
        default=False,
        env_var=_env("no_ignore_eos"),
        help="Do not send ignore_eos/min_tokens (for servers that reject them).",
    )
    target.add_argument(
        "--llm-batch-size",
        type=int,
        default=1,
        env_var=_env("batch_size"),
        help="Prompts per /v1/completions request (batch mode; 1 = one prompt per request).",
    )

    prompts = parser.add_argument_group("loadknee: prompts")
    prompts.add_argument(
        "--llm-input-tokens",
        type=int,
        default=128,
        env_var=_env("input_tokens"),
        help="Fixed-length mode: prompt length in the server's tokens (calibrated before the run).",
    )
    prompts.add_argument(
        "--llm-output-tokens",
        type=int,
        default=64,
        env_var=_env("output_tokens"),
        help="Fixed-length mode: completion length (max_tokens, plus ignore_eos/min_tokens).",
    )
    prompts.add_argument(
        "--llm-prompt-log",
        default="",
        env_var=_env("prompt_log"),
        help="Replay a production prompt log (JSONL of OpenAI bodies, JSONL/CSV of prompt text, "
        "or a lengths-only log) instead of fixed-length prompts.",
    )
    prompts.add_argument(
        "--llm-log-format",
        default="auto",
        choices=["auto", "openai", "text", "lengths"],
        env_var=_env("log_format"),
        help="Format of --llm-prompt-log (default: detect).",
    )
    prompts.add_argument(
        "--llm-sample-without-replacement",
        action="store_true",
        default=False,
        env_var=_env("sample_without_replacement"),
        help="Sample log entries without replacement (default: with replacement).",
    )
    prompts.add_argument(
        "--llm-output-scale",
        type=float,
        default=1.0,
        env_var=_env("output_scale"),
        help="Multiply replayed output lengths by this factor.",
    )
    prompts.add_argument(
        "--llm-shared-prefix-tokens",
        type=int,
        default=0,
        env_var=_env("shared_prefix_tokens"),
        help="Put the same N-token system prefix before every prompt (measure prefix caching).",
    )
    prompts.add_argument(
        "--llm-no-unique-tag",
        action="store_true",
        default=False,
        env_var=_env("no_unique_tag"),
        help="Do not start each prompt with a unique tag (lets the prefix cache flatter results).",
    )
    prompts.add_argument(
        "--llm-no-calibrate",
        action="store_true",
        default=False,
        env_var=_env("no_calibrate"),
        help="Skip calibrating the prompt length against the server's tokenizer.",
    )
    prompts.add_argument(
        "--llm-seed",
        type=int,
        default=0,
        env_var=_env("seed"),
        help="Seed for prompt sampling.",
    )

    shape = parser.add_argument_group("loadknee: stepped shape")
    shape.add_argument(
        "--llm-levels",
        default=DEFAULT_LEVELS,
        env_var=_env("levels"),
        help=f"Concurrency levels, comma separated (default {DEFAULT_LEVELS}; seed 000: 1,2,4,8).",
    )
    shape.add_argument(
        "--llm-stage-seconds",
        type=float,
        default=120.0,
        env_var=_env("stage_seconds"),
        help="Hold each level this long, warm-up included (ignored with --llm-stage-requests).",
    )
    shape.add_argument(
        "--llm-stage-requests",
        type=int,
        default=0,
        env_var=_env("stage_requests"),
        help="Instead of a duration, hold each level until N requests completed (seed 000: 40).",
    )
    shape.add_argument(
        "--llm-warmup-seconds",
        type=float,
        default=30.0,
        env_var=_env("warmup_seconds"),
        help="Discard the first S seconds of each level as warm-up (seed 002: 30).",
    )
    shape.add_argument(
        "--llm-cooldown-seconds",
        type=float,
        default=10.0,
        env_var=_env("cooldown_seconds"),
        help="Pause with 0 users between levels so queues and memory drain.",
    )
    shape.add_argument(
        "--llm-baseline-requests",
        type=int,
        default=20,
        env_var=_env("baseline_requests"),
        help="Sequential single-user baseline before the sweep: 1 warm-up + N measured (0 = off).",
    )
    shape.add_argument(
        "--llm-time-limit",
        type=float,
        default=0.0,
        env_var=_env("time_limit"),
        help="Stop the whole test after S seconds (0 = no limit; --run-time also works).",
    )
    shape.add_argument(
        "--llm-red-line-error-pct",
        type=float,
        default=0.0,
        env_var=_env("red_line_error_pct"),
        help="Stop the sweep early when a stage's error rate exceeds this percentage (0 = never).",
    )
    shape.add_argument(
        "--llm-red-line-p95-ms",
        type=float,
        default=0.0,
        env_var=_env("red_line_p95_ms"),
        help="Stop the sweep early when a stage's P95 e2e latency exceeds this (0 = never).",
    )

    # refinement and early stop (issue 12); read in SchedulePlan.from_options
    shape.add_argument(
        "--llm-no-refine",
        action="store_true",
        default=False,
        env_var=_env("no_refine"),
        help="Do not run extra levels between the last good level and the knee (default: refine "
        "until the bracket is at most max(1 user, 10 %% of the good level)).",
    )
    shape.add_argument(
        "--llm-refine-max-stages",
        type=int,
        default=4,
        env_var=_env("refine_max_stages"),
        help="At most this many refine stages per run (default 4: the default grid's widest "
        "bracket, 8 to 16 users, needs 3; one more for a knee that moves).",
    )
    shape.add_argument(
        "--llm-stop-after-knee",
        type=int,
        default=1,
        env_var=_env("stop_after_knee"),
        help="Once the knee is refined, stop when this many tested levels lie above it "
        "(default 1; -1 = run the whole grid).",
    )

    record = parser.add_argument_group("loadknee: run directory and telemetry")
    record.add_argument(
        "--llm-out",
        default="runs",
        env_var=_env("out"),
        help="Parent folder of run directories (default ./runs).",
    )
    record.add_argument(
        "--llm-run-id",
        default="",
        env_var=_env("run_id"),
        help="Name of the run directory (default: a timestamp).",
    )
    record.add_argument(
        "--llm-gpu",
        default="auto",
        choices=["auto", "nvml", "dcgm", "none"],
        env_var=_env("gpu"),
        help="GPU telemetry source (auto: NVML if a local GPU, else DCGM "
        "names on the server's /metrics or --llm-dcgm-url).",
    )
    record.add_argument(
        "--llm-dcgm-url",
        default="",
        env_var=_env("dcgm_url"),
        help="DCGM exporter URL to scrape (e.g. http://gpu-host:9400/metrics).",
    )
    record.add_argument(
        "--llm-metrics-url",
        default="",
        env_var=_env("metrics_url"),
        help="Server Prometheus endpoint (default: <host>/metrics; 'none' to disable).",
    )
    record.add_argument(
        "--llm-sample-interval",
        type=float,
        default=0.5,
        env_var=_env("sample_interval"),
        help="Seconds between telemetry samples (default 0.5, as seed 000's nvidia-smi -lms 500).",
    )
