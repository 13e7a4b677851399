"""``loadknee predict RUN_DIR --input-tokens N --output-tokens M``: the capacity at other lengths.

Analyses the run as ``loadknee analyze`` does (same thresholds: the ones the run recorded),
fits the capacity model (:mod:`analysis.predict.fit`), predicts at the given lengths
(:mod:`analysis.predict.whatif`) and prints the answer (:mod:`analysis.report.predict_words`).
A length not given is the run's own. Writes nothing. Exit codes: 0 predicted; 3 no number (the
decode step could not be fitted, or the capacity lies beyond twice the largest batch measured);
2 a missing or invalid run directory or wrong arguments, in one line.
"""

from __future__ import annotations

import argparse
import math

from analysis.command_parser import CommandParser, fail
from analysis.inputs.load import RunDirError
from analysis.pipeline import analyze_run
from analysis.predict.facts import Workload
from analysis.predict.fit import fit_capacity
from analysis.predict.whatif import predict
from analysis.report.predict_words import prediction_text

PROG = "loadknee predict"


def _tokens(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of tokens: {text!r}") from None
    if not math.isfinite(value) or value < 1:
        raise argparse.ArgumentTypeError(f"tokens must be 1 or more: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog=PROG,
        description="Predict the capacity and the deploy figure at other prompt and completion "
        "lengths from one run's fit (decode step vs batch, prefill per token, slot limit, KV "
        "budget), with 90 % intervals, the limit that binds, and the loadknee run command that "
        "would check it. Exit codes: 0 predicted; 3 no number (no decode fit, or beyond twice "
        "the largest batch measured); 2 a bad run directory or wrong arguments.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (runs/<run_id>)")
    parser.add_argument(
        "--input-tokens", type=_tokens, metavar="N", default=None,
        help="prompt tokens per request (default: the run's mean)",
    )  # fmt: skip
    parser.add_argument(
        "--output-tokens", type=_tokens, metavar="M", default=None,
        help="completion tokens per request (default: the run's mean)",
    )  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    try:
        analysis = analyze_run(ns.run_dir)
    except RunDirError as exc:
        return fail(PROG, f"{ns.run_dir} is not a valid run directory: {'; '.join(exc.problems)}")
    fit = fit_capacity(analysis)
    measured = fit.workload
    workload = Workload(
        ns.input_tokens if ns.input_tokens is not None else measured.input_tokens,
        ns.output_tokens if ns.output_tokens is not None else measured.output_tokens,
    )
    if not (math.isfinite(workload.input_tokens) and math.isfinite(workload.output_tokens)):
        return fail(PROG, "the run has no ok request to take its lengths from: give both "
                    "--input-tokens and --output-tokens")  # fmt: skip
    prediction = predict(fit, workload, analysis.knee_params)
    print(prediction_text(prediction))
    return 0 if prediction.refusal is None and prediction.point is not None else 3


if __name__ == "__main__":
    raise SystemExit(main())
