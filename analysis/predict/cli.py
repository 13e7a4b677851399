"""``loadknee predict RUN_DIR --input-tokens N --output-tokens M``: the capacity at other lengths.

Analyses the run as ``loadknee analyze`` does (same thresholds: the ones the run recorded),
fits the capacity model (:mod:`analysis.predict.fit`), predicts at the given lengths
(:mod:`analysis.predict.whatif`) and prints the answer (:mod:`analysis.report.predict_words`).
A length not given is the run's own. ``--prompt-log LOG``: the length mix of a prompt log
(the shapes ``loadknee run --prompt-log`` replays; :mod:`analysis.predict.mix`), modelled as
its mean work per request. ``--check RUN_DIR OTHER_RUN`` predicts at OTHER_RUN's
lengths and thresholds and compares with what it measured (:mod:`analysis.predict.check`):
the model's error on the user's own server. ``--format json``: the same facts as strict JSON
(:mod:`analysis.report.predict_json`). Writes nothing. Exit codes: 0 predicted (a check whose
measured capacity falls outside the interval still exits 0: it is a measurement, not a gate);
3 no number (the decode step could not be fitted, the model does not reproduce RUN_DIR's own
latency (:mod:`analysis.predict.insample`), the capacity lies beyond twice the largest batch
measured, or a run cannot tell its own capacity — RUN_DIR, or with ``--check`` either run:
``loadknee analyze`` exits 3 on it too); 2 a missing or invalid run directory or wrong
arguments, in one line.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable

from analysis.inputs.load import RunDirError
from analysis.pipeline import Analysis, analyze_run
from analysis.predict.check import check, measured_run
from analysis.predict.facts import CapacityFit, Workload
from analysis.predict.fit import fit_capacity
from analysis.predict.mix import read_mix
from analysis.predict.whatif import predict
from analysis.report.predict_json import check_json, prediction_json
from analysis.report.predict_words import check_text, prediction_text, unreadable_log_text
from loadknee_core.command_parser import CommandParser, fail

PROG = "loadknee predict"


def _at_least_one(cast: type[float] | type[int], expected: str) -> Callable[[str], float]:
    """An argparse type: ``cast`` of the text, 1 or more, else ``expected`` in the error."""

    def parse(text: str) -> float:
        try:
            value = cast(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 1:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


_tokens = _at_least_one(float, "1 or more tokens")
_count = _at_least_one(int, "a whole number, 1 or more")
#: the engine's settings a user may state (:func:`analysis.predict.fit.fit_capacity`): flag, help
STATED_SETTINGS = (
    (
        "--slots",
        "the server's limit on running sequences, if you know it (vLLM --max-num-seqs, "
        "llama-server --parallel, SGLang --max-running-requests): used instead of what the run "
        "read or assumed",
    ),
    (
        "--kv-tokens",
        "the server's KV-cache pool in tokens, if you know it (vLLM's start-up log: 'GPU KV "
        "cache size: N tokens'; SGLang max_total_num_tokens): a run without /metrics cannot "
        "tell its slot limit from a full KV cache, and longer contexts turn on which it was",
    ),
)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog=PROG,
        description="Predict the capacity and the deploy figure at other prompt and completion "
        "lengths from one run's fit (decode step vs batch, prefill per token, slot limit, KV "
        "budget), with 90 % intervals, the limit that binds, and the loadknee run command that "
        "would check it; with --check RUN_DIR OTHER_RUN, predict OTHER_RUN's lengths and "
        "compare with what it measured. Exit codes: 0 predicted (or checked); 3 no number (no "
        "decode fit, a model that misses the run's own latency, beyond twice the largest batch "
        "measured, or a run that cannot tell its own capacity); 2 a bad run directory or wrong "
        "arguments.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (runs/<run_id>)")
    parser.add_argument(
        "other_run", metavar="OTHER_RUN", nargs="?", default=None,
        help="with --check: the run to check the prediction against",
    )  # fmt: skip
    parser.add_argument(
        "--check", action="store_true",
        help="predict OTHER_RUN's lengths from RUN_DIR and compare with what OTHER_RUN measured "
        "(the deploy figure, the offline batch against its knee, P95 e2e per level)",
    )  # fmt: skip
    parser.add_argument(
        "--format", choices=["text", "json"], default="text",
        help="text (default) or the facts as strict JSON",
    )  # fmt: skip
    parser.add_argument(
        "--input-tokens", type=_tokens, metavar="N", default=None,
        help="prompt tokens per request (default: the run's mean)",
    )  # fmt: skip
    parser.add_argument(
        "--output-tokens", type=_tokens, metavar="M", default=None,
        help="completion tokens per request (default: the run's mean)",
    )  # fmt: skip
    parser.add_argument(
        "--prompt-log", metavar="LOG", default=None,
        help="predict at a prompt log's length mix (the logs loadknee run --prompt-log replays) "
        "instead of fixed lengths",
    )  # fmt: skip
    for flag, meaning in STATED_SETTINGS:
        parser.add_argument(flag, type=_count, metavar="N", default=None, help=meaning)
    return parser


def _emit(text: str) -> None:
    """Print the answer; a reader that closed the pipe early (``| head``) is not an error."""
    try:
        print(text, flush=True)
    except BrokenPipeError:  # stdout to devnull, so the interpreter's final flush stays quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _analyze(run_dir: str) -> Analysis | str:
    """The analysed run, or the one line that says why it is not a run directory."""
    try:
        return analyze_run(run_dir)
    except RunDirError as exc:
        return f"{run_dir} is not a valid run directory: {'; '.join(exc.problems)}"


def _fit(ns: argparse.Namespace, analysis: Analysis) -> CapacityFit:
    """The run's capacity model, with the engine's settings the user stated."""
    return fit_capacity(analysis, stated_slots=ns.slots, stated_kv_tokens=ns.kv_tokens)


def _check(ns: argparse.Namespace, analysis: Analysis) -> int:
    other = _analyze(ns.other_run)
    if isinstance(other, str):
        return fail(PROG, other)
    measured = measured_run(other)
    if measured is None:
        return fail(PROG, "OTHER_RUN has no ok request and no prompt lengths in run.json to "
                    "take its lengths from")  # fmt: skip
    result = check(_fit(ns, analysis), measured, other.knee_params)
    _emit(check_json(result) if ns.format == "json" else check_text(result))
    p = result.prediction
    compared = p.refusal is None and p.point is not None and measured.cannot_tell is None
    return 0 if compared else 3


def _from_log(ns: argparse.Namespace, analysis: Analysis, fit: CapacityFit) -> int:
    """The prediction at a prompt log's mix; a log that cannot be read is one line, exit 2."""
    run_output = fit.workload.output_tokens
    try:
        mix = read_mix(ns.prompt_log, run_output if math.isfinite(run_output) else math.nan)
    except (OSError, ValueError) as exc:
        return fail(PROG, unreadable_log_text(ns.prompt_log, str(exc)))
    w = mix.workload
    if not (math.isfinite(w.input_tokens) and math.isfinite(w.output_tokens)):
        return fail(PROG, "the prompt log's records give no completion length and the run has "
                    "no ok request to take one from")  # fmt: skip
    prediction = predict(fit, w, analysis.knee_params)
    _emit(
        prediction_json(prediction, mix)
        if ns.format == "json"
        else prediction_text(prediction, mix, ns.prompt_log)
    )
    return 0 if prediction.refusal is None and prediction.point is not None else 3


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_intermixed_args(argv)
    if ns.check and ns.other_run is None:
        parser.error("--check needs two runs: RUN_DIR OTHER_RUN")
    if not ns.check and ns.other_run is not None:
        parser.error("a second run goes with --check: --check RUN_DIR OTHER_RUN")
    fixed = ns.input_tokens is not None or ns.output_tokens is not None
    if ns.check and (fixed or ns.prompt_log is not None):
        parser.error(
            "--check takes the lengths from OTHER_RUN: no --input-tokens/--output-tokens/"
            "--prompt-log"
        )
    if fixed and ns.prompt_log is not None:
        parser.error("either --input-tokens/--output-tokens or --prompt-log, not both")
    analysis = _analyze(ns.run_dir)
    if isinstance(analysis, str):
        return fail(PROG, analysis)
    if ns.check:
        return _check(ns, analysis)
    fit = _fit(ns, analysis)
    measured = fit.workload
    if ns.prompt_log is not None:
        return _from_log(ns, analysis, fit)
    workload = Workload(
        ns.input_tokens if ns.input_tokens is not None else measured.input_tokens,
        ns.output_tokens if ns.output_tokens is not None else measured.output_tokens,
    )
    if not (math.isfinite(workload.input_tokens) and math.isfinite(workload.output_tokens)):
        return fail(PROG, "the run has no ok request to take its lengths from: give both "
                    "--input-tokens and --output-tokens")  # fmt: skip
    prediction = predict(fit, workload, analysis.knee_params)
    _emit(prediction_json(prediction) if ns.format == "json" else prediction_text(prediction))
    return 0 if prediction.refusal is None and prediction.point is not None else 3


if __name__ == "__main__":
    raise SystemExit(main())
