"""Print the provisional verdict of each finished stage of a run directory still being written.

Why a child process: the Locust process must not import pandas (it would stall the gevent hub),
yet there must be one knee implementation. The web UI runs ``python -m analysis.live_verdicts
RUN_DIR`` once per finished stage, with a timeout, and shows the result as provisional: later
stages can change the baseline's reading and the knee (a knee is only *confirmed* by a later
stage). Output: one JSON object on stdout, ``{"stages": [{stage, users, verdict, reasons}],
"knee_stage": int|null, "summary": str}``; on an unreadable run, ``{"error": str}`` and exit 1.
"""

from __future__ import annotations

import json
import sys

from analysis.pipeline import analyze_run


def verdicts(run_dir: str) -> dict[str, object]:
    """The analysis's own verdicts over the stages written so far (``stages.csv``)."""
    knee = analyze_run(run_dir).knee
    return {
        "stages": [
            {
                "stage": v.stage,
                "users": v.target_users,
                "verdict": v.verdict,
                "reasons": list(v.reasons),
                "trusted": v.trusted,
            }
            for v in knee.stages
        ],
        "knee_stage": knee.knee_stage,
        "summary": knee.summary,
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m analysis.live_verdicts RUN_DIR", file=sys.stderr)
        return 2
    try:
        out: dict[str, object] = verdicts(args[0])
        code = 0
    except Exception as exc:  # a run still being written: say why, never a traceback to the UI
        out, code = {"error": f"{type(exc).__name__}: {exc}"}, 1
    print(json.dumps(out))
    return code


if __name__ == "__main__":
    raise SystemExit(main())
