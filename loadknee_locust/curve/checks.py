"""The curve replay's options read into the plan's parameters and checked before any load.

Apart from :mod:`loadknee_locust.curve.replay` (which the shape runs and which reads the plugin's
state) so that the option check (:mod:`loadknee_locust.plugin.validate`) reaches it without an
arrow back into the plugin: stdlib, the log only opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loadknee_locust.curve.plan import PlanParams, parse_scales

if TYPE_CHECKING:
    from loadknee_locust.plugin.options import LlmOptions


def plan_params(options: LlmOptions) -> PlanParams:
    return PlanParams(
        time_scale=options.time_scale,
        window_s=options.curve_window_seconds,
        scales=parse_scales(options.curve_scales),
        latency_s=options.curve_latency_seconds or None,
    )


def curve_problems(options: LlmOptions) -> list[str]:
    """What is wrong with the curve options, before any load (the log is only opened)."""
    problems: list[str] = []
    try:
        plan_params(options)
    except ValueError as exc:
        problems.append(str(exc))
    if options.prompt_log or options.turns > 1 or options.classes or options.batch_size > 1:
        problems.append(
            "--llm-replay-curve sets each request's lengths from its log, one request per user "
            "at a time: it cannot be combined with --llm-prompt-log, --llm-turns, "
            "--llm-classes or --llm-batch-size"
        )
    if options.rates or options.arrival_log:
        problems.append(
            "--llm-replay-curve is a closed loop (users follow the log's requests in flight): "
            "it cannot be combined with the open loop's --llm-rates or --llm-arrival-log"
        )
    try:
        with open(options.replay_curve, "rb"):
            pass
    except OSError as exc:
        problems.append(f"--llm-replay-curve: cannot read {options.replay_curve}: {exc.strerror}")
    return problems
