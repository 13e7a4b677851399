"""A server that refuses past its limit is measured at that limit (issue 39, item 3).

An independent server (:mod:`tests.support.refusing_server`, not the simulator) answers HTTP 429
"Model is overloaded" at once while ``N`` requests are in it. For N = 6, 10 and 20, none a grid
level, the default ``loadknee run`` (refinement and early stop on; short stages) must refine below
the first refusing level instead of stopping there at the red line, and the analysis must answer
``max_concurrency`` N or N − 1, never above N; the screen names the refusal ("the server refuses
above ~N: HTTP 429 'Model is overloaded'") and asks for no cap below the server's own. Or, where
the load generator itself ran late at a stage that could have moved the answer (two shared
cores, three sweeps at once), it says "cannot tell" with the measured lag
(:mod:`tests.support.late_client`). With and
without a simulator-style ``/metrics`` (running/waiting gauges): separate sweeps, since the
sweep's refine choices rest on what the judgement sees.

The six sweeps run three at a time (nothing here is timed); each server runs on its own event
loop in this process, each sweep in its own Locust process. About 100 s in all on two shared cores.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from analysis.knee.refusal_signal import refusal_limit
from analysis.pipeline import analyze_run
from analysis.report.refusal_text import refusal_line
from analysis.report.screen import answer_lines
from analysis.stages.refusals import stage_refusals
from analysis.stages.summary import measured_requests
from tests.support.late_client import late_cannot_tell
from tests.support.refusing_server import RefusingServer
from tests.support.run_support import submitted

pytestmark = pytest.mark.slow

LIMITS = (6, 10, 20)
CASES = [(n, metrics) for n in LIMITS for metrics in (False, True)]
SHORT = ["--stage-seconds", "3", "--warmup-seconds", "1", "--cooldown-seconds", "0.5",
         "--baseline-requests", "5",
         # tests the refusal answer, not loadknee predict: skip the probe's ~2 s a sweep
         "--no-concurrency-probe"]  # fmt: skip


def sweep(limit: int, metrics: bool, out: Path) -> tuple[str, Path, int]:
    """One default ``loadknee run`` against a refusing server; (stages.csv, run dir, peak)."""
    name = f"refuse-{limit}-{'metrics' if metrics else 'hidden'}"
    with RefusingServer(limit=limit, metrics=metrics) as server:
        run = subprocess.run(
            [sys.executable, "-m", "loadknee_locust", "run", "--no-analyze", "--host", server.url,
             *SHORT,
             "--out", str(out), "--run-id", name],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        peak, refused = server.peak, server.refused
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert refused > 0 and peak <= limit, (refused, peak)
    return (out / name / "stages.csv").read_text(), out / name, peak


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):  # type: ignore[no-untyped-def]
    # all six at once: 33.5 CPU-seconds in 54 s side by side alone on this 2-core machine (three
    # at a time: 108 s), each answering its limit
    with submitted(sweep, CASES, tmp_path_factory.mktemp("runs"), len(CASES)) as futures:
        yield futures


@pytest.mark.parametrize(("limit", "metrics"), CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_the_answer_is_the_refusal_limit(sweeps, limit: int, metrics: bool) -> None:
    stages, run_dir, _ = sweeps[(limit, metrics)].result()
    assert ",refine," in stages, stages  # refined below the first refusing level
    analysis = analyze_run(run_dir)
    if late_cannot_tell(analysis):  # a starved load generator: "cannot tell", with its lag
        return
    knee = analysis.knee
    got = knee.max_concurrency
    assert got is not None and limit - 1 <= got <= limit, f"limit {limit}: {got}\n{stages}"
    screen = "\n".join(answer_lines(analysis, width=200))
    # the refusing stage ends the capacity, its refusals signal fired (the why line says so)
    verdict = refusal_limit(knee)
    assert verdict is not None, screen
    assert any(s.fired and s.name == "refusals" for s in verdict.signals), screen
    found = stage_refusals(measured_requests(analysis.run)).get(verdict.stage)
    assert found is not None and found.http_status == 429, found
    assert "Model is overloaded" in found.message, found  # the server's own message
    said = refusal_line(analysis)  # the sentence for it, on the screen (its words: the goldens)
    assert said is not None and " ".join(said.split()) in " ".join(screen.split()), screen
    deploy = analysis.recommendations.deploy
    assert deploy is not None and deploy.bound == "refusals", screen
    # no concurrency cap to set: the server already refuses past its own limit
    withheld = [w.kind for w in analysis.recommendations.withheld if not isinstance(w, str)]
    assert "refuses" in withheld and "unknown_engine" not in withheld, screen
    caps = [i.value for i in analysis.recommendations.items if i.key.endswith("max_num_seqs")]
    assert all(v is None or v >= limit for v in caps), caps
