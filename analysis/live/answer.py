"""Judge a run still being written: the knee and each finished stage's verdict, as JSON.

``python -m analysis.live.answer RUN_DIR`` prints one JSON object from
:func:`judge`, the same rules as ``loadknee analyze``, so the levels the
adaptive sweep refines, the provisional verdicts the web UI shows and the final report all come
from one implementation of the knee. Both Locust-side callers read the same object, once per
finished stage (the sweep's shape starts the child; the web UI reads the answer the shape got)::

    {"knee_users": int|null, "red_line_users": int|null, "max_concurrency": int|null,
     "knee_stage": int|null, "summary": str,
     "slo_capacity": int|null, "slo_break_users": int|null,
     "capacity_low": float|null, "capacity_high": float|null,
     "answer": {knee.json's answer block}, "capacity_words": str, "cannot_tell": str,
     "stages": [{"stage": int, "users": int, "verdict": str, "reasons": [str], "trusted": bool,
                 "noisy": bool}],
     "rates": null | {"knee": {knee.json's rate_knee}, "stages": [{knee.json's rate_stages row}]}}

``stages`` holds the judged (step and refine) stages; the baseline is the yardstick and has none.
``slo_capacity`` and ``slo_break_users`` (the first stage that breaks them) come from the SLOs the
sweep was given (``run.json``), null without any: the sweep refines between them too.
``capacity_low`` and ``capacity_high`` are the 90 % interval of the fit over all stages
(:mod:`analysis.knee.fit`, ``knee.json``'s fields), null until it finds a plateau: the sweep
aims its refine stages inside it and stops refining once it is narrow.
``answer`` and ``capacity_words`` are the one answer's figures and words
(:mod:`analysis.report.answer_view`, as the screen and knee.json show them) over the stages so
far: the web UI shows them, so its provisional capacity reads as the report's will.
``cannot_tell`` is the report's "cannot tell: …" line where the stages so far give no answer
that stands (:mod:`analysis.advice.standing`: a late load generator, a tail in the noise of the
limit above the fit's interval, a server starved on its shared machine, no judged stage), ""
otherwise: the web UI shows it instead of
a provisional capacity. The resampled confidence is the report's alone, so the noise's pick
(``unsure``) shows only there.
``rates`` is an open-loop rate run's offered vs served rate, backlog and rate knee over the
stages so far (:mod:`analysis.stages.rate_stages`, as knee.json's ``rate_knee`` and
``rate_stages``), null for any other run: the web UI's open-loop view shows it. The deploy
figure is null in ``answer``: the advice, which only ``loadknee analyze`` computes, may lower it
(memory, engine limits); the standing reads the stages' own deploy figure
(:func:`analysis.advice.deploy.deploy_answer`) bounded by the sweep's SLO capacity.
Why a child process: the Locust process must not import pandas (a pandas call on the gevent hub
stalls every in-flight stream). A run that cannot be judged yet prints ``{"error": str}``, the
same reason on stderr, and exits 1; the sweep then goes on as the plain grid.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from analysis.advice.deploy import deploy_answer
from analysis.advice.facts import DeployAnswer
from analysis.advice.standing import answer_standing
from analysis.diagnosis.failures import overloaded_stages
from analysis.inputs.load import read_run
from analysis.knee.find import find_knee, resolve_tail_metric
from analysis.knee.late_client import late_baseline
from analysis.report.answer_view import answer_view, capacity_words
from analysis.report.knee_json import jsonable, summary_records
from analysis.report.knee_summary import summary_words
from analysis.report.rate_words import rate_knee_json, rate_records
from analysis.report.stage_reasons import reasons_text
from analysis.report.standing import cannot_tell_text
from analysis.slo.evaluate import evaluate_slos
from analysis.stages.baseline import compute_baseline
from analysis.stages.rate_stages import run_rates
from analysis.stages.summary import measured_requests, summarize_stages
from loadknee_core.knee_params import run_knee_params
from loadknee_core.slo_targets import run_slo_params


def judge(run_dir: str) -> dict[str, Any]:
    """The knee, the red line, the recommended concurrency and each stage's verdict so far.

    The steps of :func:`analysis.pipeline.analyze_run` up to :func:`analysis.knee.find.find_knee`
    (read, summarise, baseline, tail metric, knee), with the thresholds the sweep was given
    (``run.json``, :func:`~loadknee_core.knee_params.run_knee_params`): the same rules and the same
    answer as ``loadknee analyze`` on the run; the
    confidence resampling and the bottleneck diagnosis, which change neither the knee nor
    ``max_concurrency`` and cost ~95 % of a full analysis, are left to ``loadknee analyze``.
    """
    run = read_run(run_dir)
    measured = measured_requests(run)
    summary = summarize_stages(run, measured=measured)
    baseline = compute_baseline(run, summary, measured=measured)
    params = resolve_tail_metric(run_knee_params(run.run_info), run.run_info, baseline)
    knee = find_knee(summary, baseline, params=params)
    slo_params = run_slo_params(run.run_info)
    slo = evaluate_slos(summary, knee, params=slo_params, measured=measured)
    broken = [s.target_users for s in slo.stages if not s.met] if slo is not None else []
    view = answer_view(knee, None)
    # the report's deploy figure: the stages' own (a departed tail may set it below the knee)
    # or the sweep's SLO capacity where lower; only levels up to it can put the answer in doubt
    # (analysis.advice.standing.tail_in_doubt), and the level past it decided it (starved_server)
    bound = deploy_answer(summary, knee)
    capacity = None if slo is None else slo.capacity
    if capacity is not None and (bound.users is None or capacity < bound.users):
        bound = DeployAnswer(capacity, "sla", "")
    standing = answer_standing(
        knee,
        bound,
        baseline_late=late_baseline(summary, baseline),
        overloaded=overloaded_stages(summary, run.run_info),
    )
    rated = run_rates(run, summary, baseline=baseline, slo=slo, knee=params)
    return {
        "knee_users": knee.knee_users,
        "red_line_users": knee.red_line_users,
        "max_concurrency": knee.max_concurrency,
        "server_slots": knee.server_slots,
        "knee_stage": knee.knee_stage,
        "summary": summary_words(knee),
        "slo_capacity": slo.capacity if slo is not None else None,
        "slo_break_users": min(broken) if broken else None,
        "capacity_low": knee.capacity_low,
        "capacity_high": knee.capacity_high,
        "answer": view.as_json(),
        "capacity_words": capacity_words(view),
        "cannot_tell": cannot_tell_text(standing, knee) if standing.cannot_tell else "",
        "stages": [
            {
                "stage": v.stage,
                "users": v.target_users,
                "verdict": v.verdict,
                "reasons": list(reasons_text(v)),
                "trusted": v.trusted,
                "noisy": v.noisy,
            }
            for v in knee.stages
        ],
        "rates": None
        if rated is None
        else {
            "knee": jsonable(rate_knee_json(rated[1])),
            "stages": summary_records(rate_records(rated[0])),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.live.answer", description=__doc__)
    parser.add_argument("run_dir")
    parser.add_argument("--json", action="store_true", help="accepted; JSON is the only format")
    args = parser.parse_args(argv)
    try:
        answer = judge(args.run_dir)
    except Exception as exc:  # a run still being written: say why, never a traceback
        reason = f"{type(exc).__name__}: {exc}"
        print(f"analysis.live.answer: {reason}", file=sys.stderr)
        print(json.dumps({"error": reason}))
        return 1
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
