"""``loadknee verify RUN_DIR --host URL``: re-run a short sweep and check the answer still holds.

Steps: analyse RUN_DIR (the original); measure again, through ``loadknee run``'s own machinery,
a baseline and the levels :func:`analysis.compare.verify.verify_levels` names (the recommended
max_concurrency, the production watermark, the knee) with the original's prompt settings from
its run.json (model, endpoint, streaming, input and output lengths; a replayed log must be given
again with ``--prompt-log``, since run.json keeps only its hash); analyse the re-run with the
same knee thresholds; print one PASS/FAIL line per check (:mod:`analysis.compare.verify`) and exit 1
when any fails, 0 when all pass, 3 when none failed but one cannot tell (a throughput check failed
on a machine overloaded with the server on it), 2 when the original cannot be read or the re-run
did not happen.
Options it does not know go to ``loadknee run`` (and so to Locust) unchanged.

The analysis package is imported only here, in the command's process, never in the Locust one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from loadknee_core.command_parser import CommandParser

#: default seconds per re-run level: short, yet long enough for an interval on most servers
STAGE_SECONDS = 20.0


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(
        prog="loadknee verify",
        description="Re-run a short sweep at the recommended max_concurrency, the production "
        "watermark and the knee, compare with the original run, print PASS/FAIL per check and "
        "exit 1 on a failure (a rollout can gate on it); exit 3 where a failure may be the "
        "machine's (the server on it, overloaded): cannot tell.",
        epilog="Unknown options are passed to 'loadknee run' (and Locust) unchanged.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="the original run directory")
    p.add_argument("--host", required=True, help="server base URL to verify")
    p.add_argument(
        "--stage-seconds",
        type=float,
        help=f"hold each level S seconds (default: the original's, at most {STAGE_SECONDS:g})",
    )
    p.add_argument("--warmup-seconds", type=float, default=3.0, help="warm-up per level (3)")
    p.add_argument("--baseline-requests", type=int, default=10, help="sequential baseline (10)")
    p.add_argument("--prompt-log", help="the replayed log again, when the original replayed one")
    p.add_argument(
        "--tolerance-pct",
        type=float,
        default=None,
        help="throughput band floor in %% of the original (default 10)",
    )
    p.add_argument("--out", help="parent folder of the re-run (default: beside RUN_DIR)")
    p.add_argument("--run-id", help="re-run directory name (default: RUN_ID-verify-TIME)")
    from loadknee_core.knee_params import KneeParams

    KneeParams.add_cli_args(p, given_only=True)  # not typed: the original run's thresholds
    return p


def run_arguments(
    info: dict[str, Any], levels: tuple[int, ...], ns: argparse.Namespace, run_id: str, out: str
) -> list[str]:
    """The ``loadknee run`` arguments for the re-run (pure: tested without running)."""
    params = info.get("parameters") if isinstance(info.get("parameters"), dict) else {}
    assert isinstance(params, dict)
    original_s = params.get("llm_stage_seconds")
    seconds = ns.stage_seconds
    if seconds is None:
        seconds = STAGE_SECONDS
        try:  # a number (as text since the option also takes "auto"); "auto" keeps the default
            original = float(original_s) if original_s is not None else 0.0
        except (TypeError, ValueError):
            original = 0.0
        if original > 0:
            seconds = min(original, STAGE_SECONDS)
    args = ["--host", ns.host, "--levels", ",".join(str(u) for u in levels)]
    # exactly the levels to check: refining between them would measure levels nobody asked
    # about (the re-run's own knee is not the question), for two or three more stages of GPU time
    args.append("--no-refine")
    args += ["--stage-seconds", f"{seconds:g}", "--warmup-seconds", f"{ns.warmup_seconds:g}"]
    args += ["--baseline-requests", str(ns.baseline_requests), "--out", out, "--run-id", run_id]
    if info.get("model"):
        args += ["--model", str(info["model"])]
    if info.get("endpoint") in ("chat", "completions"):
        args += ["--endpoint", str(info["endpoint"])]
    if info.get("stream") is False:
        args.append("--no-stream")
    source = info.get("prompt_source") if isinstance(info.get("prompt_source"), dict) else {}
    assert isinstance(source, dict)
    if ns.prompt_log:
        args += ["--prompt-log", ns.prompt_log]
    else:
        for flag, key in (
            ("--input-tokens", "target_input_tokens"),
            ("--output-tokens", "target_output_tokens"),
        ):
            if isinstance(source.get(key), int):
                args += [flag, str(source[key])]
    return args


def main(argv: list[str] | None = None) -> int:
    from analysis.compare.verify import (
        EXIT_CODES,
        TOLERANCE_PCT,
        format_checks,
        overall,
        verify_checks,
    )
    from analysis.compare.verify import verify_levels as levels_for
    from analysis.diagnosis.failures import overloaded_stages
    from analysis.inputs.load import RunDirError
    from analysis.pipeline import analyze_run
    from loadknee_core.knee_params import KneeParams, as_flags
    from loadknee_locust.commands import run as run_command

    parser = build_parser()
    ns, passthrough = parser.parse_known_args(argv)

    def say(message: str) -> None:
        print(f"[verify] {message}", file=sys.stderr, flush=True)

    try:  # judged with the original's recorded thresholds, the typed ones on top
        before = analyze_run(ns.run_dir, knee_overrides=KneeParams.given(ns))
    except RunDirError as exc:
        print(f"loadknee verify: cannot analyse {ns.run_dir}. {exc}", file=sys.stderr)
        return 2
    info = dict(before.run.run_info)
    source = info.get("prompt_source")
    if isinstance(source, dict) and source.get("kind") == "log" and not ns.prompt_log:
        print(
            "loadknee verify: the original replayed a prompt log; pass it again with --prompt-log",
            file=sys.stderr,
        )
        return 2
    levels = levels_for(before.knee, before.recommendations.get("production_watermark"))
    if not levels:
        print("loadknee verify: the original run gives no level to verify", file=sys.stderr)
        return 2
    out = ns.out or str(Path(ns.run_dir).resolve().parent)
    run_id = ns.run_id or f"{before.run_id}-verify-{time.strftime('%Y%m%d-%H%M%S')}"
    say(f"re-running levels {list(levels)} against {ns.host} into {Path(out) / run_id}")
    params = before.knee_params  # the re-run is judged as the original was, live and after
    rerun_args = [*run_arguments(info, levels, ns, run_id, out), *as_flags(params)]
    rc = run_command.main([*rerun_args, "--no-analyze", *passthrough])  # verify judges it
    rerun = Path(out) / run_id
    if rc != 0 or not (rerun / "requests.csv").exists():
        print(f"loadknee verify: the re-run failed (exit {rc})", file=sys.stderr)
        return 2
    after = analyze_run(rerun, knee_params=params)
    checks = verify_checks(
        before.summary,
        before.knee,
        after.summary,
        after.knee,
        tolerance_pct=TOLERANCE_PCT if ns.tolerance_pct is None else ns.tolerance_pct,
        overloaded=(
            *overloaded_stages(before.summary, before.run.run_info),
            *overloaded_stages(after.summary, after.run.run_info),
        ),
    )
    text = format_checks(checks)
    (rerun / "verify.txt").write_text(text + "\n", encoding="utf-8")
    print(text)
    return EXIT_CODES[overall(checks)]


if __name__ == "__main__":
    raise SystemExit(main())
