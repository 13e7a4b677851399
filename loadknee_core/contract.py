"""The run-directory contract: file names, columns (with units) and closed vocabularies.

This is the only thing the Locust side (``loadknee_locust``) and the offline side (``analysis``)
share. It is pure stdlib on purpose: ``analysis`` imports it without importing locust or gevent,
and the plugin imports it without importing pandas.

Conventions:

* one observation per row; the unit is in the column name (``_ms``, ``_s``, ``_unix_s``, ``_pct``,
  ``_mib``);
* a missing value is an empty cell (read back as NaN, never 0);
* timestamps are numeric unix seconds (float), never local-time strings;
* booleans are written as ``1`` / ``0`` (empty when unknown);
* writers flush at least once a second, so a killed run leaves readable files.

Files in ``runs/<run_id>/``:

``run.json``
    One JSON object: every parameter, target URL and model, prompt source (kind, target lengths,
    log file sha256, never its text), versions, start time, worker count. Never an API key.

``stages.csv`` (one row per stage; see :data:`STAGE_COLUMNS`)
    ``stage`` integer index (0-based, in run order; the baseline, when there is one, is stage 0),
    ``kind`` (``baseline`` | ``step`` | ``refine``: a level added between the grid's levels; rows
    are in run order, so a 12-user ``refine`` stage can follow the 16-user ``step``),
    ``target_users``, ``batch_size``, ``start_unix_s`` (users
    released), ``warmup_end_unix_s`` (measured window opens), ``measure_end_unix_s`` (measured
    window closes, users stopped), ``end_unix_s`` (cooldown over), ``stop_reason``
    (:data:`STOP_REASONS`).

``requests.csv`` (one row per request; see :data:`REQUEST_COLUMNS`)
    ``request_id`` (unique within the run: ``<worker>-<sequence>``), ``stage``, ``phase``
    (:data:`PHASES`), ``worker`` (``local`` or the worker index), ``user_id``, ``endpoint``
    (``chat`` | ``completions``), ``stream`` (1/0), ``batch_size`` (prompts in the request),
    ``start_unix_s``, ``end_unix_s``, ``e2e_ms``, ``ttft_ms`` (first content-bearing chunk; empty
    when not streaming), ``tpot_ms`` ((e2e - ttft) / (completion_tokens - 1)), ``itl_mean_ms``,
    ``itl_p50_ms``, ``itl_p95_ms``, ``itl_max_ms`` (gaps between content chunks), ``chunks``
    (content-bearing chunks), ``prompt_tokens``, ``completion_tokens``, ``usage_source``
    (``server`` | ``estimate`` | ``none``), ``target_input_tokens``, ``target_output_tokens``,
    ``length_ok`` (1/0, empty when no target), ``outcome`` (:data:`OUTCOMES`), ``http_status``,
    ``error`` (short, one line), ``prompt_hash`` (sha256 prefix of the prompt text; the text
    itself is never written), ``resent`` (times the request was sent again on a fresh
    connection because its reused keep-alive socket was found closed before the request reached
    the server: 0 or 1; empty in files written before the column existed), ``conversation_id``
    and ``turn`` (a multi-turn user's conversation and the request's turn in it, 0 first; empty for
    single-turn requests and in files written before the columns existed), ``traffic_class`` (the
    request's class under ``--llm-classes``; empty without classes), ``cached_tokens`` (prompt
    tokens the server says it found in its prefix cache, from ``usage.prompt_tokens_details``;
    empty when it does not say), ``intended_unix_s`` (open loop: when the schedule meant the
    request to go out; ``start_unix_s`` is when it did), ``send_wait_ms`` (open loop: how long
    it waited past its planned time for a slot under ``--llm-max-in-flight`` or a late hub:
    ``start_unix_s - intended_unix_s``, never hidden), ``e2e_intended_ms`` (open loop: the
    latency counted from the planned send, ``send_wait_ms + e2e_ms``: no coordinated
    omission); the three are empty in closed-loop runs.

``gpu.csv`` (one row per GPU per sample; see :data:`GPU_COLUMNS`)
    ``timestamp_unix_s``, ``gpu_index``, ``source`` (``nvml`` | ``dcgm`` | ``nvidia-smi`` |
    ``sim``), ``memory_used_mib``, ``memory_total_mib``, ``gpu_util_pct``, ``sm_util_pct``,
    ``mem_bw_util_pct``, ``power_w`` (board power draw, W; empty in files written before the
    column existed), ``error`` (empty on a good sample; a failed sample is a row with empty
    values and the reason here, so the gap is visible).

``server_metrics.csv`` (one row per scraped sample, long form; see :data:`SERVER_METRIC_COLUMNS`)
    ``timestamp_unix_s``, ``endpoint`` (the scraped URL, credentials stripped), ``metric`` (the
    Prometheus sample name as exposed, e.g. ``vllm:num_requests_waiting``), ``labels`` (the
    Prometheus label set rendered as ``k="v",k2="v2"``), ``value``, ``error`` (a failed scrape is
    one row with empty metric/value and the reason).

``client.csv`` (one row per sample; see :data:`CLIENT_COLUMNS`)
    ``timestamp_unix_s``, ``worker``, ``cpu_pct`` (load-generator process CPU, 100 = one core),
    ``memory_mib``, ``users``, ``loop_lag_max_ms`` and ``loop_lag_mean_ms`` (how late that
    process's event loop ran since its previous row: a greenlet's oversleep past a 50 ms sleep,
    the delay every request's timestamps suffered; the worker's own on a worker row),
    ``host_load_1m`` (the machine's 1-minute load average) and ``host_cpus`` (its CPU count);
    the last four are empty in files written before the columns existed.

``locust.log`` (written by ``loadknee run`` only, when Locust has ended)
    Every line Locust printed: its own log lines stay off the terminal unless ``--verbose``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Final, Literal, get_args

RUN_JSON: Final = "run.json"
STAGES_CSV: Final = "stages.csv"
REQUESTS_CSV: Final = "requests.csv"
GPU_CSV: Final = "gpu.csv"
SERVER_METRICS_CSV: Final = "server_metrics.csv"
CLIENT_CSV: Final = "client.csv"
#: every line Locust printed during a ``loadknee run`` (its log lines stay off the terminal)
LOCUST_LOG: Final = "locust.log"

Phase = Literal["baseline", "warmup", "measure", "cooldown"]
PHASES: Final[tuple[str, ...]] = get_args(Phase)

StageKind = Literal[
    "baseline",  # one user, sequential requests
    "step",  # a level of the planned (coarse) grid
    "refine",  # a level added between the last good level and the knee, to pin max_concurrency
]
STAGE_KINDS: Final[tuple[str, ...]] = get_args(StageKind)
#: The red line's error share, one setting for the sweep and the analysis: a stage whose failed
#: requests are more than this % of its measured ones is the red line. The sweep stops there
#: (``--llm-red-line-error-pct``) and the analysis names it so (``--red-line-error-pct``); 0 makes
#: any error the red line, 100 none (no share is above 100 %). run.json records the value used.
RED_LINE_ERROR_PCT: Final[float] = 5.0
#: The half-width (±%) wanted of a stage's output-throughput interval, one setting for the sweep
#: and the analysis: an ``auto``-length stage is held until its interval is this narrow
#: (``--llm-stage-precision-pct``), and the analysis says how long a stage would need to reach it
#: (the record table's ``window_needed_s``, the knee's ``target_interval_pct``).
INTERVAL_TARGET_PCT: Final[float] = 5.0

#: Stage kinds that are a concurrency level of the sweep (what the knee is looked for in).
LEVEL_KINDS: Final[tuple[str, ...]] = ("step", "refine")

StopReason = Literal[
    "duration",  # held for the configured time
    "request_count",  # reached the configured number of completed requests
    "precise",  # stage length auto: the throughput interval reached the asked precision
    "imprecise",  # stage length auto: held to its maximum without reaching that precision
    "red_line",  # early stop: error rate or latency ceiling crossed
    "knee_confirmed",  # early stop: the knee was found, refined and confirmed by N more levels
    "time_limit",  # the run's overall time limit cut it
    "stopped",  # stopped by the user (web UI stop)
    "interrupted",  # Ctrl-C / SIGTERM (or the wrapper died): the stage is partial
]
STOP_REASONS: Final[tuple[str, ...]] = get_args(StopReason)

Outcome = Literal[
    "ok",  # complete response, lengths as targeted (or no target)
    "length_mismatch",  # complete, but the server's token counts miss the target: kept, flagged
    "http_error",  # non-200 status (429/503 rejections, 400 too long, 500)
    "connect_error",  # could not connect / connection refused or reset before a response
    "timeout",  # connect or read timed out (before or during the stream)
    "incomplete",  # the stream ended or was cut before data: [DONE]
    "malformed",  # a chunk or body that is not valid JSON / not the OpenAI shape
    "stream_error",  # an error object inside the stream or body
    "empty_response",  # HTTP 200 with no choices / no content
    "client_error",  # an exception in the load generator itself
    "cancelled",  # the load generator stopped the user mid-request (run end, ramp-down, Ctrl-C)
]
OUTCOMES: Final[tuple[str, ...]] = get_args(Outcome)
#: Outcomes that are not errors: served, or served with a length miss (kept, flagged).
NOT_ERROR_OUTCOMES: Final[tuple[str, ...]] = ("ok", "length_mismatch")
#: Outcomes that say nothing about the server: neither served nor an error in any statistic.
NOT_JUDGED_OUTCOMES: Final[tuple[str, ...]] = ("cancelled",)
#: Outcomes that count as a served request in the statistics.
SUCCESS_OUTCOMES: Final[tuple[str, ...]] = ("ok",)


def failure_cause(row: Mapping[str, object]) -> str:
    """A failed row's cause in a few words: its short ``error``, else its HTTP status, else its
    outcome. Takes a ``csv`` row (strings) or a frame's record (NaN for an empty cell)."""
    error = row.get("error")
    if isinstance(error, str) and error.strip():
        return error
    try:
        status = float(str(row.get("http_status")))
    except ValueError:
        status = 0.0
    if status == status and status > 0:  # NaN-safe
        return f"HTTP {int(status)}"
    outcome = row.get("outcome")
    return outcome if isinstance(outcome, str) and outcome else "unknown"


def failure_causes(rows: Iterable[Mapping[str, object]]) -> Counter[str]:
    """The failed rows counted by :func:`failure_cause` (served and not-judged rows left out)."""
    return Counter(
        failure_cause(r)
        for r in rows
        if r.get("outcome") not in SUCCESS_OUTCOMES and r.get("outcome") not in NOT_JUDGED_OUTCOMES
    )


def all_failed(
    rows: Iterable[Mapping[str, object]], *, top: int = 3
) -> tuple[int, list[tuple[str, int]]] | None:
    """How many requests failed and their ``top`` causes counted, when the rows hold requests
    and none was served; None otherwise. A request our own stop cancelled says nothing of the
    target: it is neither a request here nor a failure."""
    judged = [r for r in rows if r.get("outcome") not in NOT_JUDGED_OUTCOMES]
    if not judged or any(r.get("outcome") in SUCCESS_OUTCOMES for r in judged):
        return None
    return len(judged), failure_causes(judged).most_common(top)


def all_failed_words(requests: int, causes: Iterable[tuple[str, int]]) -> str:
    """``"all N requests failed (n × cause, ...)"``: the words ``loadknee run`` and the
    analysis both say."""
    counted = ", ".join(f"{n} × {cause}" for cause, n in causes)
    return f"all {requests} requests failed ({counted})"


def all_failed_summary(rows: Iterable[Mapping[str, object]], *, top: int = 3) -> str | None:
    """:func:`all_failed` in words; None when some request was served or none was made."""
    failed = all_failed(rows, top=top)
    return None if failed is None else all_failed_words(*failed)


STAGE_COLUMNS: Final[tuple[str, ...]] = (
    "stage",
    "kind",
    "target_users",
    "batch_size",
    "start_unix_s",
    "warmup_end_unix_s",
    "measure_end_unix_s",
    "end_unix_s",
    "stop_reason",
)

#: requests.csv's columns added after its first release (see :data:`ADDED_COLUMNS`)
REQUEST_ADDED_COLUMNS: Final[tuple[str, ...]] = (
    "resent",
    "conversation_id",
    "turn",
    "traffic_class",
    "cached_tokens",
    "intended_unix_s",
    "send_wait_ms",
    "e2e_intended_ms",
)

REQUEST_COLUMNS: Final[tuple[str, ...]] = (
    "request_id",
    "stage",
    "phase",
    "worker",
    "user_id",
    "endpoint",
    "stream",
    "batch_size",
    "start_unix_s",
    "end_unix_s",
    "e2e_ms",
    "ttft_ms",
    "tpot_ms",
    "itl_mean_ms",
    "itl_p50_ms",
    "itl_p95_ms",
    "itl_max_ms",
    "chunks",
    "prompt_tokens",
    "completion_tokens",
    "usage_source",
    "target_input_tokens",
    "target_output_tokens",
    "length_ok",
    "outcome",
    "http_status",
    "error",
    "prompt_hash",
    *REQUEST_ADDED_COLUMNS,
)

#: Columns added to a file after its first release: a file without them is still read (older
#: run directories, other tools' imports), the column then empty. File name → its added columns.
ADDED_COLUMNS: Final[dict[str, frozenset[str]]] = {
    REQUESTS_CSV: frozenset(REQUEST_ADDED_COLUMNS),
    GPU_CSV: frozenset({"power_w"}),
    CLIENT_CSV: frozenset({"loop_lag_max_ms", "loop_lag_mean_ms", "host_load_1m", "host_cpus"}),
}

GPU_COLUMNS: Final[tuple[str, ...]] = (
    "timestamp_unix_s",
    "gpu_index",
    "source",
    "memory_used_mib",
    "memory_total_mib",
    "gpu_util_pct",
    "sm_util_pct",
    "mem_bw_util_pct",
    "power_w",
    "error",
)

SERVER_METRIC_COLUMNS: Final[tuple[str, ...]] = (
    "timestamp_unix_s",
    "endpoint",
    "metric",
    "labels",
    "value",
    "error",
)

CLIENT_COLUMNS: Final[tuple[str, ...]] = (
    "timestamp_unix_s",
    "worker",
    "cpu_pct",
    "memory_mib",
    "users",
    "loop_lag_max_ms",
    "loop_lag_mean_ms",
    "host_load_1m",
    "host_cpus",
)

#: File name → its columns, for writers and for ``analysis.inputs.load`` validation alike.
CSV_COLUMNS: Final[dict[str, tuple[str, ...]]] = {
    STAGES_CSV: STAGE_COLUMNS,
    REQUESTS_CSV: REQUEST_COLUMNS,
    GPU_CSV: GPU_COLUMNS,
    SERVER_METRICS_CSV: SERVER_METRIC_COLUMNS,
    CLIENT_CSV: CLIENT_COLUMNS,
}
