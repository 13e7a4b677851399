"""The prefix cache raises the KV-bound capacity, as the simulator's parameters say it must.

A simulator that admits a sequence only when every running one's prompt + max_tokens fits its
KV budget (``kv_reserve_max_tokens``: a hard limit, no preemption) of 5,632 tokens, and 1,280-token
prompts whose first 1,024 tokens are one shared system prompt (``--llm-shared-prefix-tokens``).
Without the cache each sequence claims 1,280 + 32 tokens: 5632 // 1312 = 4 fit. With it the 64
cached blocks are held once by every running sequence (vLLM's paged KV shares them): (5632 −
1024) // (1312 − 1024) = 16 fit. The truth is :func:`~loadknee_locust.sim.saturation.kv_limit`
and :func:`~loadknee_locust.sim.saturation.predicted_knee_level` on the simulator's own
parameters: knee 8 users with the cache off, 24 with it on, over levels 4, 8, 16, 24. Each
pair is judged with the server's ``/metrics`` and without: the knee is found from the client's
rows either way; only the hit rate needs the counters.

Only a real sweep shows where the simulator's KV reservation puts the knee and what hit rate its
counters report. The pair is swept once, with ``/metrics``; the sweep's plan is fixed (levels,
``--no-refine``, ``--stop-after-knee -1``), so the ``no-metrics`` case judges a copy of each run
as a server without ``/metrics`` leaves it, every scrape a 404
(:func:`tests.support.run_support.without_server_metrics`): its knee, its ``max_concurrency``
from the client's rows, its empty ``running_max`` and hit rate are read from that copy. Runs
against a server that has no ``/metrics`` at all are swept in tests/e2e/test_refine_sim.py,
test_openloop_sim.py and test_curve_sim.py (two workers).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from analysis.pipeline import analyze_run
from loadknee_locust.sim.launch import SimProcess
from loadknee_locust.sim.params import preset
from loadknee_locust.sim.saturation import kv_limit, predicted_knee_level
from tests.support.late_client import late_cannot_tell
from tests.support.prefix_truth import INPUT, OUTPUT, PREFIX, SIM, prefix_sweep
from tests.support.run_support import without_server_metrics

pytestmark = pytest.mark.slow

LEVELS = (4, 8, 16, 24)


def _sweep(out: Path, caching: bool) -> Path:
    run_id = f"cache-{'on' if caching else 'off'}"
    with SimProcess.start("kv-bound", enable_prefix_caching=caching, **SIM) as sim:
        return prefix_sweep(sim.url, out, run_id, LEVELS)


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> dict[bool, Path]:
    """The cache-on and cache-off sweeps side by side (the Locust processes mostly wait)."""
    out = tmp_path_factory.mktemp("prefix-kv")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {c: pool.submit(_sweep, out, c) for c in (True, False)}
    return {caching: future.result() for caching, future in futures.items()}


@pytest.fixture(scope="module", params=[True, False], ids=["metrics", "no-metrics"])
def runs(request, swept, tmp_path_factory) -> dict[bool, Path]:
    """The sweeps as recorded, or copies of them without the server's counters."""
    if request.param:
        return swept
    hidden = tmp_path_factory.mktemp("prefix-kv-hidden")
    return {c: without_server_metrics(d, hidden / d.name) for c, d in swept.items()}


def test_the_truth_from_the_simulators_parameters() -> None:
    params = preset("kv-bound", enable_prefix_caching=True, **SIM)
    assert kv_limit(params, INPUT, OUTPUT) == 4
    assert kv_limit(params, INPUT, OUTPUT, cached_tokens=PREFIX) == 16
    assert predicted_knee_level(params, LEVELS, INPUT, OUTPUT) == 8
    assert predicted_knee_level(params, LEVELS, INPUT, OUTPUT, cached_tokens=PREFIX) == 24


def _with_metrics(request: pytest.FixtureRequest) -> bool:
    return bool(request.node.callspec.params["runs"])


def test_the_kv_bound_knee_moves_as_the_simulator_predicts(runs, request) -> None:
    params = preset("kv-bound", enable_prefix_caching=True, **SIM)
    for caching, run_dir in runs.items():
        analysis = analyze_run(run_dir)
        if late_cannot_tell(analysis):  # a late load generator: "cannot tell", with its lag
            continue
        cached = PREFIX if caching else 0
        expected = predicted_knee_level(params, LEVELS, INPUT, OUTPUT, cached_tokens=cached)
        knee = analysis.knee
        steps = analysis.summary[analysis.summary["kind"] == "step"].set_index("target_users")
        assert knee.knee_users == expected, (caching, knee.summary, steps["output_tok_s"])
        # the most it runs at once is the KV limit: max_concurrency is that limit, from the
        # server's running gauge (with /metrics) or from the client's rows (without)
        limit = kv_limit(params, INPUT, OUTPUT, cached_tokens=cached)
        assert knee.max_concurrency == limit, knee.summary
        if _with_metrics(request):
            assert steps["running_max"].max() == limit
        else:
            assert steps["running_max"].isna().all()
        # beyond the limit the added users only queue (the hard reservation keeps it flat):
        # 24 users serve no more than 10 % above the limit's stage, beyond the two stages' own
        # 95 % intervals (a busy box once slowed the 16-user stage alone: 698 then 781 tok/s)
        # (a stage too short for an interval is read at its point figure)
        top = steps["output_tok_s"]
        low = steps["output_tok_s_low"].fillna(top)
        high = steps["output_tok_s_high"].fillna(top)
        assert low.at[24] <= 1.1 * high.at[limit], (top, low, high)
        assert top.at[24] >= 0.9 * top.at[limit], top  # and no less: queued users lose nothing


def test_the_hit_rate_needs_the_servers_counters(runs, request) -> None:
    on = analyze_run(runs[True]).summary
    steps = on[on["kind"] == "step"]["prefix_cache_hit_pct"]
    if _with_metrics(request):  # 1024 of 1280 prompt tokens are found once the cache is warm
        assert steps.between(79.0, 81.0).all(), steps
    else:
        assert steps.isna().all()
