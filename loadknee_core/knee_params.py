"""The knee's thresholds (:class:`KneeParams`), their flags, and the values a run was judged with.

Each threshold is one field, its ``--knee-*`` flag declared on it
(:func:`loadknee_core.flags.flag`);
:mod:`analysis.knee.find` says what each one does. The sweep adds the same flags to Locust's
parser, so ``run.json``'s ``parameters`` hold every value as ``knee_<field>`` and the live judge
judges with them. The red line is one setting for the sweep and the analysis:
``--llm-red-line-error-pct`` (``loadknee run --red-line-error-pct``) stops the sweep at the stage
the analysis calls the red line, so the run records it once, under that name
(:data:`RUN_RED_LINE_PARAMETER`). ``loadknee analyze`` judges a run with its recorded values
unless a flag overrides one (:func:`overrides` says which).

Stdlib only: the Locust side imports it without pandas.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from loadknee_core.contract import INTERVAL_TARGET_PCT, RED_LINE_ERROR_PCT
from loadknee_core.flags import add_flags, flag, flag_specs, given_values

#: the namespace and run.json prefix of every knee threshold
PREFIX = "knee_"
#: where run.json keeps the red line's error share (the sweep's own option, which stops there)
RUN_RED_LINE_PARAMETER = "llm_red_line_error_pct"
#: the field the sweep takes under its own option name, so its parser leaves it out
SWEEP_OWN = ("red_line_error_pct",)
TITLE = "knee thresholds"


@dataclass(frozen=True)
class KneeParams:
    """Every threshold of :func:`~analysis.knee.find.find_knee`; its module docstring says what
    each one does."""

    throughput_column: Literal["output_tok_s", "total_tok_s", "qps"] = flag(
        "output_tok_s",
        "throughput measure for the flattening signal (default %(default)s)",
        spelling="--knee-throughput",
    )
    flat_gain_ratio: float = flag(
        0.15,
        "marginal gain per added user / single-user rate below which throughput has flattened "
        "(default %(default)s)",
        spelling="--knee-flat-gain",
    )
    narrowing_gain_ratio: float = flag(
        0.5, "... below which the gain is narrowing (default %(default)s)",
        spelling="--knee-narrowing-gain",
    )  # fmt: skip
    tail_percentile: Literal["p95", "p99"] = flag(
        "p95", "tail percentile (default %(default)s)", spelling="--knee-tail"
    )
    tail_metric: Literal["auto", "e2e", "slowdown", "s_per_1k"] = flag(
        "auto",
        "tail on e2e latency, on each request's slowdown (its e2e over its single-user time at "
        "its lengths: for runs whose lengths vary), or on e2e seconds per 1k tokens (see "
        "docs/method.md); auto: slowdown for a replayed log, else e2e (default %(default)s)",
    )
    tail_ratio: float = flag(
        2.0, "tail / baseline tail at which the tail has departed (default %(default)s)"
    )
    sla_ms: float | None = flag(
        None,
        "absolute latency SLA on the tail percentile, ms (default %(default)s)",
        spelling="--sla-ms",
    )
    memory_source: Literal["auto", "kv_cache", "gpu"] = flag(
        "auto", "memory signal: KV-cache %% when present, or GPU memory %% (default %(default)s)"
    )
    memory_pressure_pct: float = flag(
        85.0, "memory %% that is an early sign (default %(default)s)",
        spelling="--knee-memory-pct",
    )  # fmt: skip
    oom_risk_pct: float = flag(
        95.0, "memory %% at which the next stage risks OOM (default %(default)s)"
    )
    oom_pct: float = flag(
        99.0, "GPU memory %% that, with failures, means OOM (default %(default)s)"
    )
    red_line_error_pct: float = flag(
        RED_LINE_ERROR_PCT,
        "error share (%%) above which a stage is the red line, as the sweep's "
        "--llm-red-line-error-pct (default: the run's, else %(default)s; 0 = any error, "
        "100 = never)",
        spelling="--red-line-error-pct",
    )
    client_cpu_limit_pct: float = flag(
        90.0,
        "load-generator CPU %% (100 = one core) at which a stage is client-bound "
        "(default %(default)s)",
        spelling="--client-cpu-limit",
    )
    resume_gain_pct: float = flag(
        15.0,
        "a flat stage that a later stage out-serves by this %% or more was a dip, not the knee "
        "(default %(default)s)",
        spelling="--knee-resume-pct",
    )
    noise_aware: bool = flag(
        True,
        "judge on the point figures alone, not on their 95 %% intervals",
        spelling="--knee-ignore-noise",
        action="store_false",
    )
    max_interval_pct: float = flag(
        10.0,
        "a stage whose throughput interval is wider than ±this %% is marked untrusted "
        "(default %(default)s)",
    )
    target_interval_pct: float = INTERVAL_TARGET_PCT
    saturated_waiting: float = flag(
        1.0,
        "mean waiting requests (server metrics) that, with the running count at its most, mean "
        "the server is saturated (default %(default)s)",
    )
    saturated_running_share: float = 0.9
    fit_resamples: int = 200

    @staticmethod
    def add_cli_args(parser: Any, *, given_only: bool = False, skip: tuple[str, ...] = ()) -> None:
        """Add the ``--knee-*`` flags (see :func:`loadknee_core.flags.add_flags`)."""
        add_flags(parser, KneeParams, prefix=PREFIX, title=TITLE, given_only=given_only, skip=skip)

    @classmethod
    def from_cli_args(cls, ns: argparse.Namespace, base: KneeParams | None = None) -> KneeParams:
        """``base`` (default: every default) with the flags the namespace holds."""
        return replace(base or cls(), **cls.given(ns))

    @classmethod
    def given(cls, ns: argparse.Namespace) -> dict[str, Any]:
        """``{field: value}`` of the flags the namespace holds (typed ones, with ``given_only``)."""
        return given_values(ns, cls, prefix=PREFIX)


#: every threshold at its default: the one home of a default that a function taking one threshold
#: alone (the fit's flat gain, the rate knee's tail ratio, the simulator's predicted knee, the
#: intervals' target) falls back to
DEFAULTS = KneeParams()


def run_knee_params(run_info: Mapping[str, Any]) -> KneeParams:
    """The thresholds the sweep judged the run with, from ``run.json`` (defaults where absent).

    A run that recorded no ``knee_*`` value predates the shared red line, whose sweep option then
    meant something else (0 was "never stop"): such a run is judged with the defaults.
    """
    parameters = run_info.get("parameters")
    if not isinstance(parameters, Mapping):
        return KneeParams()
    defaults = KneeParams()
    values = {
        f.name: parameters[PREFIX + f.name]
        for f in fields(KneeParams)
        if PREFIX + f.name in parameters
        and _fits(parameters[PREFIX + f.name], getattr(defaults, f.name))
    }
    red = parameters.get(RUN_RED_LINE_PARAMETER)
    if values and red is not None and _fits(red, defaults.red_line_error_pct):
        values["red_line_error_pct"] = float(parameters[RUN_RED_LINE_PARAMETER])
    return replace(defaults, **values)


def _fits(value: Any, default: Any) -> bool:
    """Whether a recorded value can stand for a field with this default (a hand-edited run.json
    may hold anything: a value of another type keeps the default)."""
    if value is None:
        return default is None
    if isinstance(value, bool) or isinstance(default, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if default is None or isinstance(default, int | float):
        return isinstance(value, int | float)
    return isinstance(value, type(default))


def as_flags(params: KneeParams) -> list[str]:
    """The flags that give ``params`` on a command line (only those off their default), for a
    re-run to be judged as the original was."""
    defaults = KneeParams()
    argv: list[str] = []
    for spec in flag_specs(KneeParams, prefix=PREFIX):
        value = getattr(params, spec.name)
        if value == getattr(defaults, spec.name):
            continue
        argv += [spec.spelling] if spec.action else [spec.spelling, f"{value}"]
    return argv


@dataclass(frozen=True)
class KneeOverride:
    """A threshold given on the command line that differs from the one the run recorded."""

    flag: str  # its --knee-* spelling
    used: Any
    recorded: Any


def overrides(recorded: KneeParams, used: KneeParams) -> tuple[KneeOverride, ...]:
    """The thresholds ``used`` that differ from the run's ``recorded`` ones, in field order
    (worded by :func:`analysis.report.knee_summary.override_note`)."""
    spelled = {s.name: s.spelling for s in flag_specs(KneeParams, prefix=PREFIX)}
    return tuple(
        KneeOverride(spelled.get(f.name, f.name), getattr(used, f.name), getattr(recorded, f.name))
        for f in dataclasses.fields(KneeParams)
        if getattr(used, f.name) != getattr(recorded, f.name)
    )
