"""Check the web UI start form's ``--llm-*`` values before Locust applies them: a message, not a
traceback.

Why: Locust's ``/swarm`` converts each custom field with the type of its current value
(``float("abc")`` raises inside Flask: a 500 and a traceback in the terminal, and the form just
spins), and a sweep whose levels or durations do not make a plan fails later, at the first shape
tick, in the log only. Checked here, the form shows the reason and nothing starts. The same for
open-loop rate stages (``--llm-rates``): their plan's own rules, and rates only where the web UI
runs the open-loop locustfile (elsewhere they would be ignored, and a closed-loop sweep start).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from loadknee_locust.arrivals.plan import OpenLoopPlan
from loadknee_locust.plugin.options import LlmOptions, option_specs
from loadknee_locust.sweep.schedule import SchedulePlan


def check_form(
    form: Mapping[str, str], current: LlmOptions, *, open_loop: bool | None = None
) -> str | None:
    """``None`` when the form's values make a valid sweep, else one sentence saying what is wrong.

    ``current`` holds the values the form does not send (the form posts every visible field, but
    a client may post a few). ``open_loop``: whether the locustfile sends open-loop load (its
    shape is the open-loop one); None when not known.
    """
    values: dict[str, Any] = {}
    for spec in option_specs():
        if spec.dest not in form:
            continue
        raw = form[spec.dest]
        if spec.kind is bool:
            values[spec.name] = str(raw).strip().lower() in ("1", "true", "on")
            continue
        try:
            value = spec.kind(raw)
        except (TypeError, ValueError):
            kind = {int: "a whole number", float: "a number"}.get(spec.kind, spec.kind.__name__)
            return f"{spec.label} ({spec.flag}): {raw!r} is not {kind}."
        if spec.choices and str(value) not in spec.choices:
            return f"{spec.label} ({spec.flag}): {raw!r} is not one of {', '.join(spec.choices)}."
        if isinstance(value, int | float) and value < 0 and spec.name != "temperature":
            return f"{spec.label} ({spec.flag}): must not be negative, got {raw!r}."
        values[spec.name] = value
    try:
        options = dataclasses.replace(current, **values)
        SchedulePlan.from_options(options)
        if open_loop or options.rates or options.arrival_log:
            OpenLoopPlan.from_options(options)
    except ValueError as exc:
        return str(exc)
    if open_loop is False and options.rates:
        return (
            "Rates (--llm-rates): this web UI runs closed-loop users, which ignore rates; start "
            "it with loadknee run --web --rates ... for open-loop load."
        )
    return None
