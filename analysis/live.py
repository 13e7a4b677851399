"""The live judgement for the adaptive sweep: the knee over the stages finished so far, as JSON.

``python -m analysis.live RUN_DIR --json`` prints ``{"knee_users", "red_line_users",
"max_concurrency", "stages"}`` from :func:`analysis.pipeline.analyze_run` — the same rules as
``loadknee analyze``, so the levels the sweep refines and the answer the report gives come from
one implementation of the knee. The Locust side runs it in a child process (it imports pandas,
which must stay off the process that times requests) and turns the answer into the next stage
(:mod:`loadknee_locust.refine`). Exit status 1 with a one-line reason on stderr when the run
directory cannot be judged; the sweep then falls back to the plain grid.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from analysis.pipeline import analyze_run


def judge(run_dir: str) -> dict[str, Any]:
    """The knee, the red line and the recommended concurrency over the stages so far."""
    knee = analyze_run(run_dir).knee
    return {
        "knee_users": knee.knee_users,
        "red_line_users": knee.red_line_users,
        "max_concurrency": knee.max_concurrency,
        "stages": len(knee.stages),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.live", description=__doc__)
    parser.add_argument("run_dir")
    parser.add_argument("--json", action="store_true", help="print JSON (the only format)")
    args = parser.parse_args(argv)
    try:
        answer = judge(args.run_dir)
    except Exception as exc:  # any failure means "cannot judge": the sweep falls back
        print(f"analysis.live: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
