"""Every ``--llm-*`` option, declared once as a field of :class:`LlmOptions`, the typed object.

Each field of :class:`LlmOptions` is one option: its name is the option's dest without the
``llm_`` prefix (``request_timeout`` ↔ ``--llm-request-timeout`` ↔ ``LOADKNEE_REQUEST_TIMEOUT``),
its default, type and help are written once, in :func:`opt`, and a ``Literal`` type gives the
choices. From that one table:

* :func:`add_arguments` adds the options to Locust's (configargparse) parser in named groups;
  ``store_true`` flags for the ``no_*``/boolean fields; each option also reads its environment
  variable and ``locust.conf`` / ``[tool.locust]`` (Locust's configargparse does that). The
  listener that calls it fires several times per process (the web UI rebuilds the parser on
  every page render), so it only declares arguments: no side effects;
* :meth:`LlmOptions.from_parsed` builds the object from ``environment.parsed_options`` (``None``:
  every default, for library use without a parser), with Locust's ``--run-time`` folded into
  ``time_limit``;
* :func:`llm_options` gives the object of one Environment, rebuilt only when the parsed values
  changed (the web UI's start form edits ``parsed_options`` in place between runs);
* ``loadknee run`` takes each option under its short name (``--stage-seconds``), grouped and
  made exclusive as :func:`opt` declares (the ``--llm-`` spelling a hidden alias there).

Nothing outside this module reads ``parsed_options.llm_*``: modules take the object.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import operator
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from loadknee_core.contract import INTERVAL_TARGET_PCT, RED_LINE_ERROR_PCT
from loadknee_core.flags import metavar
from loadknee_core.logentry import LogFormat
from loadknee_locust.prompts.model import Endpoint

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Part = TypeVar("_Part", bound="DataclassInstance")
GpuMode = Literal["auto", "nvml", "dcgm", "none"]
#: the open loop's arrival processes (loadknee_locust/arrivals/plan.py draws them)
ArrivalProcess = Literal["constant", "poisson", "gamma"]
Group = Literal["target", "prompts", "shape", "record"]
#: an option's group in ``loadknee run --help-all`` (the titles: ``commands/run.py``)
RunGroup = Literal["target", "sweep", "workload", "open", "output", "telemetry", "locust"]
#: the plugin group (Locust's ``--help``, the web UI's form) of each ``loadknee run`` group
PLUGIN_GROUP_OF: dict[RunGroup, Group] = {
    "target": "target",
    "workload": "prompts",
    "sweep": "shape",
    "open": "shape",
    "locust": "shape",
    "output": "record",
    "telemetry": "record",
}

PREFIX = "llm_"
ENV_PREFIX = "LOADKNEE_"
#: each plugin group's titles: its group in Locust's ``--help``, its section of the web UI's
#: start form (the form shows the groups in this order)
_GROUP_TITLE_PAIRS: dict[str, tuple[str, str]] = {
    "target": ("loadknee: target and requests", "Target"),
    "prompts": ("loadknee: prompts", "Prompts"),
    "shape": ("loadknee: stepped shape", "Sweep"),
    "record": ("loadknee: run directory and telemetry", "Telemetry and run directory"),
}
GROUP_TITLES: dict[str, str] = {g: titles[0] for g, titles in _GROUP_TITLE_PAIRS.items()}
FORM_GROUP_TITLES: dict[str, str] = {g: titles[1] for g, titles in _GROUP_TITLE_PAIRS.items()}
#: short labels for the web UI's start form (the help becomes the field's tooltip); kept apart
#: from the help texts so each can change alone. Only the labels an option's name does not give:
#: the others are the name, capitalised (:attr:`OptionSpec.label`); a test checks each field has
#: one or the other and that no entry here repeats its name.
LABELS: dict[str, str] = {
    "no_stream": "No streaming",
    "extra_body": "Extra body (JSON)",
    "api_key_env": "API key variable",
    "request_timeout": "Request timeout (s)",
    "no_ignore_eos": "No ignore_eos",
    "prompt_log": "Prompt log file",
    "output_scale": "Output length scale",
    "turns": "Turns per conversation",
    "think_time": "Think time (s)",
    "classes": "Traffic classes",
    "no_calibrate": "No calibration",
    "levels": "Levels (users)",
    "stage_seconds": "Stage length (s)",
    "stage_requests": "Requests per stage",
    "stage_precision_pct": "Auto stage precision (%)",
    "stage_min_seconds": "Auto stage minimum (s)",
    "stage_max_seconds": "Auto stage maximum (s)",
    "warmup_seconds": "Warm-up (s)",
    "cooldown_seconds": "Cooldown (s)",
    "time_limit": "Time limit (s)",
    "red_line_error_pct": "Red line: errors (%)",
    "red_line_p95_ms": "Red line: P95 (ms)",
    "no_refine": "No refinement",
    "refine_target_pct": "Refine target (%)",
    "refine_max_stages": "Refine stages (max)",
    "stop_after_knee": "Levels past the knee",
    "replay_curve": "Replay a log's curve",
    "curve_window_seconds": "Curve window (s)",
    "curve_latency_seconds": "Curve latency (s)",
    "slo": "SLO targets",
    "rates": "Rates (requests/s)",
    "arrivals": "Arrival process",
    "burstiness": "Burstiness (gamma shape)",
    "arrival_log": "Arrival log file",
    "out": "Runs folder",
    "gpu": "GPU telemetry",
    "dcgm_url": "DCGM exporter URL",
    "metrics_url": "Metrics URL",
    "sample_interval": "Sample interval (s)",
}
#: what to type after an option that takes a number or ``auto`` (the rest: the names and
#: suffixes of :func:`loadknee_core.flags.metavar`)
METAVARS: dict[str, str] = {
    "stage_seconds": "SECONDS|auto",
    "stage_requests": "N|auto",
    "warmup_seconds": "SECONDS|auto",
    "cooldown_seconds": "SECONDS|auto",
}
_ATTR = "_loadknee_llm_options"  # on the Environment: (parsed values seen, the object)


def opt(
    run: RunGroup, default: Any, help: str, *, flags: tuple[str, ...] = (), excludes: str = ""
) -> Any:
    """One option's ``loadknee run`` help group, default and help (a dataclass field with
    metadata); its plugin argument group follows from ``run`` (:data:`PLUGIN_GROUP_OF`).
    ``flags``: its spellings on ``loadknee run``, the primary first (default: the field's name,
    ``--stage-seconds``; the ``--llm-`` one stays a hidden alias); ``excludes``: a key shared
    by the options that exclude each other there."""
    meta = {"help": help, "group": PLUGIN_GROUP_OF[run], "run": run}
    return field(default=default, metadata={**meta, "flags": flags, "excludes": excludes})


#: :func:`opt` for each section of :class:`LlmOptions`, so a section names its group once
_target = functools.partial(opt, "target")
_workload = functools.partial(opt, "workload")
_sweep = functools.partial(opt, "sweep")
_open = functools.partial(opt, "open")
_output = functools.partial(opt, "output")
_telemetry = functools.partial(opt, "telemetry")


@dataclass(frozen=True)
class LlmOptions:
    """The plugin's options, typed; the field order is the order of ``--help``."""

    # -- target and requests
    model: str = _target(
        "", "Model name sent in every request (default: the first id from GET /v1/models)."
    )
    endpoint: Endpoint = _target(  # noqa: RUF009 (a partial of opt: a field)
        "chat", "OpenAI endpoint: /v1/chat/completions or /v1/completions."
    )
    no_stream: bool = _target(
        False, "Send stream=false (e2e only, no TTFT/ITL). Default: stream with include_usage."
    )
    temperature: float = _target(0.0, "Sampling temperature (default %(default)s).")
    extra_body: str = _target(
        "", "JSON object merged into every request body, e.g. '{\"top_p\": 1}'."
    )
    api_key_env: str = _target(
        "OPENAI_API_KEY",
        "Name of the environment variable holding the API key (the key itself is never "
        "written to any file, log or report).",
    )
    request_timeout: float = _target(
        120.0,
        "Seconds allowed for each socket read (longest prefill or inter-token gap); also "
        "the default --stop-timeout.",
    )
    no_ignore_eos: bool = _target(
        False, "Do not send ignore_eos/min_tokens (for servers that reject them)."
    )
    batch_size: int = _target(
        1, "Prompts per /v1/completions request (batch mode; 1 = one prompt per request)."
    )

    # -- prompts
    input_tokens: int = _workload(
        128, "Fixed-length mode: prompt length in the server's tokens (calibrated before the run)."
    )
    output_tokens: int = _workload(
        64,
        "Fixed-length mode: completion length (max_tokens, plus ignore_eos/min_tokens).",
        excludes="lengths",
    )
    prompt_log: str = _workload(
        "",
        "Replay a production prompt log (JSONL of OpenAI bodies, JSONL/CSV of prompt text, "
        "or a lengths-only log) instead of fixed-length prompts.",
        excludes="lengths",
    )
    log_format: LogFormat = _workload(  # noqa: RUF009 (a partial of opt: a field)
        "auto", "Format of --llm-prompt-log (default: detect)."
    )
    sample_without_replacement: bool = _workload(
        False, "Sample log entries without replacement (default: with replacement)."
    )
    output_scale: float = _workload(1.0, "Multiply replayed output lengths by this factor.")
    shared_prefix_tokens: int = _workload(
        0, "Put the same N-token system prefix before every prompt (measure prefix caching)."
    )
    no_unique_tag: bool = _workload(
        False, "Do not start each prompt with a unique tag (lets the prefix cache flatter results)."
    )
    turns: int = _workload(
        1,
        "Turns per conversation: each user holds a chat whose every turn resends the history "
        "so far (1 = single requests).",
    )
    think_time: str = _workload(
        "0", "Pause between a conversation's turns: seconds (2), exp:MEAN or uniform:LOW,HIGH."
    )
    replay_conversations: bool = _workload(
        False,
        "Replay the prompt log's recorded conversations (records with a conversation_id) turn "
        "by turn, in order, each user one at a time.",
    )
    gap_scale: float = _workload(
        1.0,
        "With --llm-replay-conversations: multiply the recorded gaps between turns (their "
        "timestamp field) by this.",
    )
    classes: str = _workload(
        "",
        "Traffic classes in one run, each request's class by weight: "
        "'NAME:WEIGHT:INPUT:OUTPUT[:SLO[+SLO]] ...' or @FILE, e.g. "
        "'chat:70:256:64:ttft_p95_ms=500 summ:30:1024:256:e2e_p95_ms=20000'.",
    )
    no_calibrate: bool = _workload(
        False,
        "Skip calibrating the prompt length against the server's tokenizer, and the probes that "
        "follow it for loadknee predict: a few timed prefill probes at other prompt lengths, "
        "and two bursts of 32 streamed requests that tell a slot limit from a KV budget.",
    )
    seed: int = _workload(0, "Seed for prompt sampling.")

    # -- stepped shape
    levels: str = _sweep(
        "1,2,4,8,16,24,32,48,64",
        "Concurrency levels, comma separated (default %(default)s; the short four-level "
        "method: 1,2,4,8).",
    )
    stage_seconds: str = _sweep(
        "120",
        "Hold each level this long, warm-up included (ignored with --llm-stage-requests); "
        "'auto': until its throughput is known within --llm-stage-precision-pct.",
        excludes="stage_length",
    )
    stage_requests: str = _sweep(
        "0",
        "Instead of a duration, hold each level until N requests completed (the fixed-count "
        "method: 40; never fewer than 5 per user); 'auto': until its throughput is known "
        "within --llm-stage-precision-pct.",
        excludes="stage_length",
    )
    stage_precision_pct: float = _sweep(
        INTERVAL_TARGET_PCT,
        "With a stage length of 'auto': hold each level until its output throughput's 95 %% "
        "interval is within +/- this %% (default %(default)s).",
    )
    stage_min_seconds: float = _sweep(
        10.0,
        "With 'auto': measure each level at least this long (default %(default)s s; a window "
        "that reached the precision by chance in its first seconds would end too soon).",
    )
    stage_max_seconds: float = _sweep(
        300.0,
        "With 'auto': measure each level at most this long, precise or not (default "
        "%(default)s s, about twice the timed method's 2-3 minutes).",
    )
    warmup_seconds: str = _sweep(
        "auto",
        "Discard the first S seconds of each level as warm-up (default auto: a quarter of "
        "--llm-stage-seconds, at most 30 s, the timed method's 30 s for its 2-minute stages; "
        "30 s when the stage has no planned length).",
    )
    cooldown_seconds: str = _sweep(
        "auto",
        "Pause with 0 users between levels so queues and memory drain (default auto: a "
        "quarter of --llm-stage-seconds, at most 10 s; 10 s when the stage has no planned "
        "length).",
    )
    baseline_requests: int = _sweep(
        20, "Sequential single-user baseline before the sweep: 1 warm-up + N measured (0 = off)."
    )
    time_limit: float = opt(
        "locust",
        0.0,
        "Stop the whole test after S seconds (0 = no limit); Locust's --run-time (90s, 5m, "
        "1h30m) sets it too.",
        flags=("--run-time", "--time-limit"),
    )
    red_line_error_pct: float = _sweep(
        RED_LINE_ERROR_PCT,
        "The red line: stop the sweep after a stage whose failed requests are more than this "
        "%% of its measured ones, the stage the analysis names the red line (default "
        "%(default)s; 0 = any error, 100 = never).",
    )
    red_line_p95_ms: float = _sweep(
        0.0, "Stop the sweep early when a stage's P95 e2e latency exceeds this (0 = never)."
    )
    no_refine: bool = _sweep(
        False,
        "Do not run extra levels between the last good level and the knee (default: refine "
        "until the capacity is known within --llm-refine-target-pct).",
    )
    refine_target_pct: float = _sweep(
        10.0,
        "Refine until the capacity is known within this %% of the last good level, at least "
        "1 user (default %(default)s): the bracket up to the knee, or the part of the fit's "
        "90 %% interval above that level once the fit over all stages has one.",
    )
    refine_max_stages: int = _sweep(
        4,
        "At most this many refine stages per run (default %(default)s: the default grid's widest "
        "bracket, 8 to 16 users, needs 3; one more for a knee that moves).",
    )
    stop_after_knee: int = _sweep(
        1,
        "Once the knee is refined, stop when this many tested levels lie above it "
        "(default %(default)s; -1 = run the whole grid).",
    )
    replay_curve: str = _open(
        "",
        "Replay this log's in-flight curve instead of the levels (closed loop): the users follow "
        "its requests in flight × --llm-curve-scales, compressed by --llm-time-scale; each user "
        "sends the lengths of a logged request around the replayed time. A prompt log with "
        "times, or a Mooncake / Azure / BurstGPT trace.",
        excludes="load",
    )
    curve_scales: str = _open(
        "1",
        "Replay the curve once at each of these traffic scales, in order (e.g. 1,1.5,2,3: the "
        "growth the deployment can take; default %(default)s).",
    )
    curve_window_seconds: float = _open(
        30.0,
        "Each stage of a curve replay is a window this many replay seconds long (whole "
        "seconds; default %(default)s).",
    )
    curve_latency_seconds: float = _open(
        0.0,
        "A request's latency where the replayed log has no end or duration (Little's law; "
        "0 = use the logged durations only).",
    )
    slo: str = _sweep(
        "",
        "Latency targets, comma separated (loadknee run --slo may also be repeated), as loadknee "
        "analyze --slo takes them (e.g. "
        "ttft_p95_ms=500,tpot_p95_ms=50): the sweep refines around the highest concurrency that "
        "meets them as it does around the knee, and the analysis reports that SLO capacity "
        "(default: none).",
    )
    # open loop (loadknee_locust/arrivals): requests at planned times, not a user count
    rates: str = _open(
        "",
        "Open loop: one stage per request rate, comma separated (e.g. 1,2,4,8 requests/s), "
        "each --llm-stage-seconds long, arrivals by --llm-arrivals (default: off, stepped "
        "concurrency).",
        excludes="load",
    )
    arrivals: ArrivalProcess = _open(  # noqa: RUF009 (a partial of opt: a field)
        "poisson",
        "Open loop: how the rate stages' requests arrive: constant gaps, poisson, or gamma "
        "with --llm-burstiness (default %(default)s).",
    )
    burstiness: float = _open(
        1.0,
        "Gamma arrivals: the shape b of the gaps (CV 1/sqrt(b): < 1 bursty, 1 Poisson, > 1 "
        "smoother; default %(default)s).",
    )
    max_in_flight: int = _open(
        256,
        "Open loop: at most this many requests in flight at once; a request that waits for a "
        "free slot records the wait (send_wait_ms) and is timed from its planned send "
        "(default %(default)s).",
    )
    arrival_log: str = _open(
        "",
        "Open loop: send the requests of this log or trace (prompt log with timestamps, "
        "Mooncake, Azure, BurstGPT) at their logged times divided by --llm-time-scale, with "
        "their logged lengths (default: off).",
        excludes="load",
    )
    time_scale: float = _open(
        1.0,
        "Arrival and curve replay (--llm-arrival-log, --llm-replay-curve): play the log this "
        "many times faster (60: an hour in a minute, 72: a day in 20 minutes; default "
        "%(default)s).",
    )

    # -- run directory and telemetry
    out: str = _output("runs", "Parent folder of run directories (default ./%(default)s).")
    run_id: str = _output("", "Name of the run directory (default: a timestamp).")
    gpu: GpuMode = _telemetry(  # noqa: RUF009 (a partial of opt: a field)
        "auto",
        "GPU telemetry source (auto: NVML if a local GPU, else DCGM "
        "names on the server's /metrics or --llm-dcgm-url).",
    )
    dcgm_url: str = _telemetry(
        "", "DCGM exporter URL to scrape (e.g. http://gpu-host:9400/metrics)."
    )
    metrics_url: str = _telemetry(
        "", "Server Prometheus endpoint (default: <host>/metrics; 'none' to disable)."
    )
    sample_interval: float = _telemetry(
        0.5, "Seconds between telemetry samples (default %(default)s, as nvidia-smi -lms 500)."
    )

    @property
    def stream(self) -> bool:
        return not self.no_stream

    @property
    def ignore_eos(self) -> bool:
        return not self.no_ignore_eos

    @classmethod
    def from_parsed(cls, parsed: Any) -> LlmOptions:
        """From Locust's ``parsed_options`` (``None`` → every default).

        A missing or ``None`` value takes the field's default; every value is converted to the
        field's type. Locust's ``--run-time`` (which Locust does not enforce for a shape) is
        folded into ``time_limit``: the sooner of the two, where both are set.
        """
        if parsed is None:
            return cls()
        values: dict[str, Any] = {}
        for spec in option_specs():
            raw = getattr(parsed, spec.dest, None)
            if raw is not None:
                values[spec.name] = spec.convert(raw)
        run_time = parsed_run_time(parsed)
        if run_time:
            limit = float(values.get("time_limit", 0.0))
            values["time_limit"] = min(limit, float(run_time)) if limit else float(run_time)
        return cls(**values)

    def part(self, cls: type[_Part], **overrides: Any) -> _Part:
        """A ``cls`` (a dataclass: a sub-plan such as the prompt options) that takes each option
        it names a field after as is; ``overrides`` give the fields it takes converted or
        renamed, and win over a same-named option."""
        own = {f.name for f in dataclasses.fields(self)}
        taken = {f.name: getattr(self, f.name) for f in dataclasses.fields(cls) if f.name in own}
        return cls(**{**taken, **overrides})

    def as_parameters(self) -> dict[str, Any]:
        """``{dest: value}`` as Locust's parser would hold them (run.json without a parser)."""
        return {PREFIX + f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class OptionSpec:
    """One option as the parser sees it, derived from its :class:`LlmOptions` field."""

    name: str
    default: Any
    kind: type
    help: str
    group: str
    choices: tuple[str, ...] | None
    #: on ``loadknee run``: its help group, its spellings (the primary first), and the key of
    #: the options it excludes ("": none)
    run_group: str
    run_flags: tuple[str, ...]
    excludes: str

    @property
    def label(self) -> str:
        """The short label of the web UI's start form (the help is its tooltip)."""
        return LABELS.get(self.name, self.name.replace("_", " ").capitalize())

    @property
    def dest(self) -> str:
        return PREFIX + self.name

    @property
    def metavar(self) -> str | None:
        """What to type after the option (None: a flag, or its choices in braces)."""
        if self.kind is bool or self.choices:
            return None
        return METAVARS.get(self.name) or metavar(self.name, self.kind)

    @property
    def flag(self) -> str:
        return "--" + self.dest.replace("_", "-")

    @property
    def env_var(self) -> str:
        return ENV_PREFIX + self.name.upper()

    def help_text(self) -> str:
        """The help with its default filled in (for parsers other than Locust's)."""
        return self.help % {"default": self.default}

    def convert(self, raw: Any) -> Any:
        """A parsed value in the field's type (the web UI keeps types; a library may not)."""
        if self.kind is bool:
            return raw if isinstance(raw, bool) else str(raw).strip().lower() in ("1", "true")
        return self.kind(raw)

    def argument_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "default": self.default,
            "env_var": self.env_var,
            "help": self.help,
        }
        if self.kind is bool:
            kwargs["action"] = "store_true"
        elif self.kind is not str:
            kwargs["type"] = self.kind
        if self.choices:
            kwargs["choices"] = list(self.choices)
        if self.metavar:
            kwargs["metavar"] = self.metavar
        return kwargs


@functools.cache
def option_specs() -> tuple[OptionSpec, ...]:
    """Every option, in declaration order (cached: the table is a constant)."""
    hints = typing.get_type_hints(LlmOptions)
    return tuple(_spec(f, hints[f.name]) for f in dataclasses.fields(LlmOptions))


def _spec(f: dataclasses.Field[Any], hint: Any) -> OptionSpec:
    choices: tuple[str, ...] | None = None
    if typing.get_origin(hint) is Literal:
        choices = tuple(str(c) for c in typing.get_args(hint))
    return OptionSpec(
        name=f.name,
        default=f.default,
        kind=type(f.default),
        help=f.metadata["help"],
        group=f.metadata["group"],
        choices=choices,
        run_group=f.metadata["run"],
        run_flags=f.metadata["flags"] or ("--" + f.name.replace("_", "-"),),
        excludes=f.metadata["excludes"],
    )


def add_arguments(parser: Any, *, skip: frozenset[str] = frozenset()) -> None:
    """Add the plugin's options to a Locust (configargparse) parser, in named groups, then the
    analysis's ``--knee-*`` thresholds: the live judge judges with them, and ``run.json``
    records them for ``loadknee analyze``. ``skip``: fields left out (``loadknee run``'s help
    lists those under their own names)."""
    groups: dict[str, Any] = {}
    for spec in option_specs():
        if spec.name in skip:
            continue
        if spec.group not in groups:
            groups[spec.group] = parser.add_argument_group(GROUP_TITLES[spec.group])
        groups[spec.group].add_argument(spec.flag, **spec.argument_kwargs())
    from loadknee_core.knee_params import SWEEP_OWN, KneeParams  # stdlib only, like this module

    KneeParams.add_cli_args(parser, skip=SWEEP_OWN)


def llm_options(environment: Any) -> LlmOptions:
    """The options of ``environment``, built once per set of parsed values.

    Kept on the Environment, never in a module global. The web UI's start form writes new
    values into ``parsed_options`` in place, so the values (not the namespace's identity) are
    compared on each call and the object is rebuilt when one changed.
    """
    parsed = getattr(environment, "parsed_options", None)
    seen = None if parsed is None else _parsed_values(parsed)
    cached = getattr(environment, _ATTR, None)
    if cached is not None and cached[0] == seen:
        return typing.cast(LlmOptions, cached[1])
    options = LlmOptions.from_parsed(parsed)
    with contextlib.suppress(AttributeError):  # an object without attributes: built each call
        setattr(environment, _ATTR, (seen, options))
    return options


def _parsed_values(parsed: Any) -> tuple[Any, ...]:
    """Every value ``from_parsed`` reads (checked per request: one C-level getattr each)."""
    try:
        return _dests_getter()(parsed)  # type: ignore[no-any-return]
    except AttributeError:  # a partial namespace (tests, library use): one by one
        dests = (*(s.dest for s in option_specs()), "run_time")
        return tuple(getattr(parsed, d, None) for d in dests)


@functools.cache
def _dests_getter() -> operator.attrgetter[Any]:
    return operator.attrgetter(*(s.dest for s in option_specs()), "run_time")


def parsed_run_time(parsed: Any) -> Any:
    """Locust's ``--run-time`` (seconds, or None), which the sweep takes as a time limit."""
    return getattr(parsed, "run_time", None)
