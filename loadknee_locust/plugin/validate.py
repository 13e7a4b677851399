"""Check the ``--llm-*`` options and the host before any load, and say every problem in one line.

Why: a bad value used to surface only once requests went out: ``--llm-request-timeout -1`` gave
one traceback per request (1,495 in 4 s) and exit 0, ``0`` was taken as "no time at all", and a
host without a scheme failed every request. :func:`option_problems` is pure (tested alone); the
plugin's ``init`` hook calls it and ends the process with exit code 2 and one message when it
finds anything, before the first user starts (``install`` in :mod:`.wiring`).
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from loadknee_core.traffic_classes import parse_classes, slo_problems
from loadknee_locust.prompts.conversation import ThinkTime
from loadknee_locust.sweep.phase_defaults import parse_phase_seconds
from loadknee_locust.sweep.schedule import SchedulePlan, parse_levels, parse_stage_length

if TYPE_CHECKING:
    from loadknee_locust.plugin.options import LlmOptions

#: option → the rule it must meet (name, test, words)
_POSITIVE = ("request_timeout", "sample_interval")
_STAGE_LENGTHS = ("stage_seconds", "stage_requests")
_PHASE_LENGTHS = ("warmup_seconds", "cooldown_seconds")  # seconds or 'auto' (phase_defaults)
_NOT_NEGATIVE = (
    "baseline_requests",
    "time_limit",
    "red_line_p95_ms",
    "temperature",
    "input_tokens",
    "output_tokens",
    "shared_prefix_tokens",
)


def _flag(name: str) -> str:
    return "--llm-" + name.replace("_", "-")


def host_problem(host: str) -> str | None:
    """None for an ``http://`` or ``https://`` URL with a host name; else what is wrong."""
    if not host:
        return "--host is required (the server's base URL, e.g. http://127.0.0.1:8000)"
    parts = urlsplit(host)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"--host must be a URL with http:// or https://, e.g. http://{host.split('/')[0]}"
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return f"--host has an invalid port: {parts.netloc}"
    return None


def _class_problems(options: LlmOptions) -> list[str]:
    if not options.classes.strip():
        return []
    try:
        classes = parse_classes(options.classes)
    except ValueError as exc:
        return [str(exc)]
    problems = slo_problems(classes)
    if options.turns > 1 or options.batch_size > 1 or options.prompt_log:
        problems.append("--llm-classes sets each request's lengths: it cannot be combined with "
                        "--llm-turns > 1, --llm-batch-size > 1 or --llm-prompt-log")  # fmt: skip
    for c in classes:
        if options.shared_prefix_tokens and c.input_tokens <= options.shared_prefix_tokens:
            problems.append(f"--llm-classes: class {c.name}'s input ({c.input_tokens}) must be "
                            "longer than --llm-shared-prefix-tokens")  # fmt: skip
    return problems


def option_problems(options: LlmOptions, host: str | None = None) -> list[str]:
    """Every problem with ``options`` (and ``host`` when given), in words; [] when all is fine."""
    problems = []
    for name in _POSITIVE:
        value = float(getattr(options, name))
        if not math.isfinite(value) or value <= 0:
            problems.append(f"{_flag(name)} must be > 0 seconds, got {value:g}")
    for name in _STAGE_LENGTHS:  # the schedule's own rule: a number or 'auto'
        try:
            parse_stage_length(getattr(options, name), _flag(name))
        except ValueError as exc:
            problems.append(str(exc))
    for name in _PHASE_LENGTHS:
        try:
            parse_phase_seconds(getattr(options, name), _flag(name))
        except ValueError as exc:
            problems.append(str(exc))
    for name in _NOT_NEGATIVE:
        value = float(getattr(options, name))
        if not math.isfinite(value) or value < 0:
            problems.append(f"{_flag(name)} must be >= 0, got {value:g}")
    if options.batch_size < 1:
        problems.append(f"--llm-batch-size must be >= 1, got {options.batch_size}")
    if not 0 <= (error_pct := options.red_line_error_pct) <= 100:
        problems.append(f"--llm-red-line-error-pct must be between 0 and 100, got {error_pct:g}")
    if options.output_scale <= 0 or not math.isfinite(options.output_scale):
        problems.append(f"--llm-output-scale must be > 0, got {options.output_scale:g}")
    if options.turns < 1:
        problems.append(f"--llm-turns must be >= 1, got {options.turns}")
    elif options.turns > 1 and options.batch_size > 1:
        problems.append("--llm-turns > 1 holds conversations: it needs --llm-batch-size 1")
    try:
        ThinkTime.parse(options.think_time)
    except ValueError as exc:
        problems.append(str(exc))
    problems += _class_problems(options)
    if options.replay_conversations and not options.prompt_log:
        problems.append("--llm-replay-conversations replays --llm-prompt-log: give the log")
    if not options.gap_scale > 0 or not math.isfinite(options.gap_scale):
        problems.append(f"--llm-gap-scale must be > 0, got {options.gap_scale:g}")
    if options.replay_curve:
        from loadknee_locust.curve.checks import curve_problems

        problems += curve_problems(options)
    if options.slo.strip():
        from loadknee_core.slo_targets import (
            parse_slo_list,  # stdlib only: the one parser of the SLO forms
        )

        try:
            parse_slo_list(options.slo)
        except ValueError as exc:
            problems.append(f"--llm-slo (--slo): {exc}")
    try:
        parse_levels(options.levels)
        if not problems:  # the plan's own rules (a measured window in every stage, ...)
            SchedulePlan.from_options(options)
    except ValueError as exc:
        problems.append(str(exc))
    if options.rates or options.arrival_log:  # open loop: its own plan's rules
        from loadknee_locust.arrivals.plan import OpenLoopPlan

        try:
            OpenLoopPlan.from_options(options)
        except ValueError as exc:
            problems.append(str(exc))
        if options.arrival_log and not os.path.isfile(options.arrival_log):
            problems.append(f"--llm-arrival-log {options.arrival_log}: no such file")
    if host is not None and (problem := host_problem(host)):
        problems.append(problem)
    return problems
