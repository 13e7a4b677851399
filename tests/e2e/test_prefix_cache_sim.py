"""Prefix caching end to end: the same sweep against the simulator with the cache on and off.

Both runs send 1280-token chat prompts whose first 1024 tokens are one shared system prompt
(``--llm-shared-prefix-tokens 1024``) to a simulator with 12 slots whose prefill is costly (0.1
ms a token), so the 64 cached blocks (1024 tokens) of every hit spare ~102 ms of prefill.
Checked against the simulator's own truth: each stage's hit rate equals the one its request log
gives (cached over prompt tokens of the requests that arrived in the window) within 1 point;
hits' TTFT is below misses' (by the spared prefill at one user); with the cache off the hit rate
is 0; the knee is where :func:`~loadknee_locust.sim.saturation.predicted_knee_level` puts it
with and without the cached tokens (8 → 16 users) and throughput at 16 users grows as
:func:`~loadknee_locust.sim.saturation.expected_throughput` says; ``loadknee compare --kind
prefix-cache`` states the change with the numbers of both run directories. 8 s stages: with
shorter ones the cache-off run's 8-user stage is too noisy to call flat.
"""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

from analysis.pipeline import analyze_run
from analysis.report.table import CACHE_RECORD_COLUMNS
from analysis.report.workload import workload_html, workload_sections
from analysis.report.workload_words import hit_miss_line, source_note
from analysis.report.writer import record_markdown
from analysis.stages.prefix_cache import counters_found, hit_miss_ttft
from loadknee_locust.sim.launch import SimProcess
from loadknee_locust.sim.params import preset
from loadknee_locust.sim.saturation import expected_throughput, predicted_knee_level
from tests.support.late_client import late_cannot_tell
from tests.support.prefix_truth import sim_hit_pct
from tests.support.run_support import loadknee

pytestmark = pytest.mark.slow

LEVELS = (4, 8, 16)
SIM = {"max_num_seqs": 12, "prefill_ms_per_token": 0.1}
PREFIX, INPUT, OUTPUT = 1024, 1280, 16


def _sweep(out: Path, run_id: str, caching: bool) -> tuple[Path, list[dict]]:
    with SimProcess.start("fast", enable_prefix_caching=caching, **SIM) as sim:
        done = loadknee(
            "run", "--no-analyze", "--host", sim.url, "--levels", ",".join(map(str, LEVELS)),
            "--stage-seconds", "8", "--warmup-seconds", "1", "--cooldown-seconds", "0.5",
            "--baseline-requests", "8", "--input-tokens", str(INPUT),
            "--output-tokens", str(OUTPUT), "--llm-shared-prefix-tokens", str(PREFIX),
            "--out", str(out), "--run-id", run_id, "--no-refine", "--stop-after-knee", "-1",
            "--no-concurrency-probe",  # tests the prefix cache, not predict: skip the ~2 s probe
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        log = sim.log()
    return out / run_id, log


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[dict]]]:
    out = tmp_path_factory.mktemp("prefix")
    # the two sweeps at once, each on its own simulator (their waits overlap: ~35 s, not ~67 s)
    with ThreadPoolExecutor(2) as pool:
        on = pool.submit(_sweep, out, "cache-on", True)
        off = pool.submit(_sweep, out, "cache-off", False)
        return {"on": on.result(), "off": off.result()}


def test_each_stage_hit_rate_is_the_simulators_own(runs) -> None:
    for name in ("on", "off"):
        run_dir, log = runs[name]
        summary = analyze_run(run_dir).summary.set_index("stage")
        truth = sim_hit_pct(run_dir, log)
        assert len(truth) == len(LEVELS) + 1
        for stage, expected in truth.items():
            measured = summary.at[stage, "prefix_cache_hit_pct"]
            assert measured == pytest.approx(expected, abs=1.0), (name, stage)
        if name == "off":
            assert (summary["prefix_cache_hit_pct"] == 0).all()
        else:  # 1024 of 1280 prompt tokens come from the cache once it is warm
            steps = summary[summary["kind"] == "step"]["prefix_cache_hit_pct"]
            assert steps.between(79.0, 81.0).all(), steps


def test_without_the_servers_metrics_the_hit_rate_is_not_measured(runs, tmp_path: Path) -> None:
    src = runs["on"][0]
    bare = tmp_path / "no-metrics"
    shutil.copytree(src, bare)
    header = (src / "server_metrics.csv").read_text().splitlines()[0]
    (bare / "server_metrics.csv").write_text(header + "\n")
    analysis = analyze_run(bare)
    assert analysis.summary["prefix_cache_hit_pct"].isna().all()
    assert counters_found(analysis.run.server_metrics) is None
    # record.md says where the hit rate would come from (none), and has no hit-rate column
    text = record_markdown(analysis)
    (column,) = CACHE_RECORD_COLUMNS
    assert source_note(analysis.run.server_metrics) in text and f"| {column.header} |" not in text


def _ttft_by_cache(run_dir: Path, log: list[dict]) -> pd.DataFrame:
    """The measured ok rows with the sim's cached tokens of each (joined on X-Request-Id): the
    client's own ``cached_tokens`` (from the usage) beside the sim's, ``cached_tokens_sim``."""
    rows = pd.read_csv(run_dir / "requests.csv").set_index("request_id")
    rows = rows[(rows["outcome"] == "ok") & rows["phase"].isin(["measure", "baseline"])]
    cached = pd.DataFrame(log).set_index("request_id")[["cached_tokens"]]
    return rows.join(cached, how="inner", rsuffix="_sim").dropna(subset=["ttft_ms"])


def test_hits_come_back_sooner_than_misses(runs) -> None:
    # the calibration probes share the system prompt, so the load of the cache-on run is all
    # hits; the misses are the cache-off run's, at the same stages
    hits = _ttft_by_cache(*runs["on"])
    misses = _ttft_by_cache(*runs["off"])
    assert (hits["cached_tokens_sim"] == PREFIX).all()
    assert (misses["cached_tokens_sim"] == 0).all()
    # the client read each hit from the usage (prompt_tokens_details.cached_tokens); the server
    # without caching does not report it
    assert (hits["cached_tokens"] == hits["cached_tokens_sim"]).all()
    assert misses["cached_tokens"].isna().all()
    # record.md's hits-vs-misses line: every stage's served rows hit, none missed
    on_run = analyze_run(runs["on"][0])
    table = hit_miss_ttft(on_run.run.requests)
    assert len(table) and (table["hits"] > 0).all() and (table["misses"] == 0).all()
    users = dict(zip(on_run.summary["stage"], on_run.summary["target_users"], strict=True))
    assert hit_miss_line(on_run.run.requests, users) in record_markdown(on_run)
    for stage in sorted(set(hits["stage"]) & set(misses["stage"])):
        on = hits.loc[hits["stage"] == stage, "ttft_ms"].median()
        off = misses.loc[misses["stage"] == stage, "ttft_ms"].median()
        assert on < off, (stage, on, off)
    # one user at a time: the baseline's TTFT falls by about the prefill of the cached tokens
    spared = PREFIX * SIM["prefill_ms_per_token"]
    base_on = hits.loc[hits["stage"] == 0, "ttft_ms"].median()
    base_off = misses.loc[misses["stage"] == 0, "ttft_ms"].median()
    assert base_off - base_on == pytest.approx(spared, rel=0.3), (base_off, base_on)


def test_the_knee_and_throughput_move_as_the_simulator_predicts(runs) -> None:
    # sparing 1024 of 1280 prefill tokens lifts the compute limit (c* ~3.9 → ~11.8, just under
    # the 12 slots): the throughput-flat knee moves from 8 users (cache off) to 16 (the slots
    # are full, 4 wait), and throughput at 16 users grows by the cost model's ratio (~3.2×)
    # or, where the load generator ran late at a stage that could have moved a run's answer (a
    # busy machine), that run says "cannot tell" with the measured lag, and nothing here is read
    # from it: its stages measured the client
    params = preset("fast", **SIM)
    analyses = {name: analyze_run(runs[name][0]) for name in ("on", "off")}
    if any([late_cannot_tell(a) for a in analyses.values()]):
        return
    for name, cached in (("on", PREFIX), ("off", 0)):
        expected = predicted_knee_level(params, LEVELS, INPUT, OUTPUT, cached_tokens=cached)
        knee = analyses[name].knee
        assert knee.knee_users == expected, (name, knee.summary)
    assert analyses["off"].knee.knee_users == 8 and analyses["on"].knee.knee_users == 16
    model = expected_throughput(params, 16, INPUT, OUTPUT, cached_tokens=PREFIX) / (
        expected_throughput(params, 16, INPUT, OUTPUT)
    )
    top = {n: a.summary.set_index("target_users").at[16, "output_tok_s"] for n, a in
           analyses.items()}  # fmt: skip
    assert top["on"] / top["off"] == pytest.approx(model, rel=0.15), (top, model)


def test_compare_prefix_cache_states_the_change_from_both_runs(runs, tmp_path: Path) -> None:
    on_dir, off_dir = runs["on"][0], runs["off"][0]
    done = loadknee("compare", "--kind", "prefix-cache", str(off_dir), str(on_dir),
                     "--out", str(tmp_path), "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads((tmp_path / "prefix-cache.json").read_text())
    off, on = analyze_run(off_dir), analyze_run(on_dir)
    off_steps = off.summary[off.summary["kind"] == "step"]
    on_steps = on.summary[on.summary["kind"] == "step"]
    assert data["a"]["hit_pct"] == 0.0
    on_hit = on_steps["prefix_cache_hits"].sum() / on_steps["prefix_cache_queries"].sum() * 100
    assert data["b"]["hit_pct"] == pytest.approx(on_hit)
    low, high = data["b"]["hit_pct_stage_range"]
    assert low == pytest.approx(on_steps["prefix_cache_hit_pct"].min())
    assert high == pytest.approx(on_steps["prefix_cache_hit_pct"].max())
    assert data["a"]["knee_users"] == off.knee.knee_users
    assert data["b"]["knee_users"] == on.knee.knee_users
    level = data["ttft_level"]
    assert level == min(off.knee.max_concurrency, on.knee.max_concurrency)
    a_row = off_steps[off_steps["target_users"] == level].iloc[0]
    b_row = on_steps[on_steps["target_users"] == level].iloc[0]
    assert data["a"]["ttft_p95_ms"] == pytest.approx(a_row["ttft_p95_ms"])
    assert data["b"]["ttft_p95_ms"] == pytest.approx(b_row["ttft_p95_ms"])
    change = (b_row["ttft_p95_ms"] / a_row["ttft_p95_ms"] - 1) * 100
    assert data["ttft_p95_change_pct"] == pytest.approx(change)
    band = data["ttft_p95_change_pct_interval"]
    sides = (data["a"]["ttft_p95_interval"], data["b"]["ttft_p95_interval"])
    if band is None:
        # a stage with too few time windows or values for an interval (seen beside a loaded
        # suite): the change has none either, and the sentence claims none — never a number
        # "beyond the noise" without one
        assert None in sides, sides
        assert "95 % interval" not in data["sentence"], data["sentence"]
    else:
        low, high = band
        assert low <= change <= high < 0  # the cache cuts TTFT, beyond the noise
        a_low, a_high = sides[0]
        assert a_low <= a_row["ttft_p95_ms"] <= a_high
    assert data["peak_tok_s_ratio"] == pytest.approx(
        on_steps["output_tok_s"].max() / off_steps["output_tok_s"].max()
    )
    sentence = data["sentence"]
    assert f"{on_hit:.0f} %" in sentence and f"{level} users" in sentence  # its figures
    assert sentence in done.stdout


def test_knee_json_and_the_html_report_carry_the_hit_rate(runs, tmp_path: Path) -> None:
    from analysis.report.writer import write_report

    analysis = analyze_run(runs["on"][0])
    paths = write_report(analysis, tmp_path)
    section = json.loads(paths["knee.json"].read_text())["prefix_cache"]
    summary = analysis.summary.set_index("stage")
    for row in section["stages"]:  # the record table's own counter deltas
        assert row["prefix_cache_hit_pct"] == pytest.approx(
            summary.at[row["stage"], "prefix_cache_hit_pct"]
        )
    hits = _ttft_by_cache(*runs["on"])
    for row in section["hit_miss_ttft"]:  # hits' TTFT P50 from the rows the server marked
        mine = hits[(hits["stage"] == row["stage"]) & (hits["cached_tokens"] > 0)]
        assert row["hits"] == len(mine) and row["misses"] == 0
        assert row["hit_ttft_p50_ms"] == pytest.approx(mine["ttft_ms"].median())
    # the page's workload section: the hit rate per stage and the hits' vs misses' TTFT
    assert section["hit_miss_ttft"]
    page = paths["report.html"].read_text()
    cache = workload_html({"prefix_cache": workload_sections(analysis)["prefix_cache"]})
    assert cache in page and cache.count("<table") == 2
    assert '<td class="n">80.0</td>' in page or '<td class="n">80</td>' in page
