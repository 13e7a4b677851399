"""SLO capacity and goodput on a real simulator run: below, at and above the knee.

One sweep of ``loadknee sim`` (8 slots, a decode step that slows by 2 ms per running sequence, so
the tail grows at every level and then jumps once requests queue) is analysed with e2e P95 limits
placed between measured stages, so the SLO capacity lands below, at and above the knee the same
run finds. Each case checks the capacity, the binding constraint named in the text report,
``recommendations.yaml`` and ``knee.json``, and that goodput equals a count made by hand with
pandas from ``requests.csv`` and ``stages.csv`` for every stage.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.pipeline import analyze_run
from analysis.report.slo_words import summary_text
from analysis.report.writer import slo_text, write_report
from loadknee_core.slo_targets import SloParams, parse_goodput, parse_slo
from tests.support.knee_simdriver import DriveSpec, drive_sim

pytestmark = pytest.mark.slow

LEVELS = (1, 2, 4, 8, 16, 32)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    from loadknee_locust.sim.launch import SimProcess

    out = tmp_path_factory.mktemp("slo") / "run"
    sim_args = {"max_num_seqs": 8, "decode_base_ms": 10.0, "decode_per_seq_ms": 2.0}
    with SimProcess.start("fast", **sim_args) as sim:
        spec = DriveSpec(levels=LEVELS, output_tokens=16, warmup_s=0.4, measure_s=2.0)
        drive_sim(sim.url, spec, out)
    return out


def _p95_by_users(run_dir: Path) -> dict[int, float]:
    """Hand-computed e2e P95 per level from requests.csv (served measured rows)."""
    requests = pd.read_csv(run_dir / "requests.csv")
    stages = pd.read_csv(run_dir / "stages.csv").set_index("stage")
    ok = requests[(requests["phase"] == "measure") & (requests["outcome"] == "ok")]
    p95 = ok.groupby("stage")["e2e_ms"].quantile(0.95)
    return {int(stages.at[s, "target_users"]): float(v) for s, v in p95.items()}


def _between(low: float, high: float) -> float:
    assert low < high, f"the e2e tail must grow from one level to the next: {low} !< {high}"
    return math.sqrt(low * high)


def test_slo_capacity_below_at_and_above_the_knee(run_dir: Path, tmp_path: Path):
    plain = analyze_run(run_dir)
    knee_users, max_conc = plain.knee.knee_users, plain.knee.max_concurrency
    assert knee_users is not None and max_conc is not None, plain.knee.summary
    assert plain.slo is None
    p95 = _p95_by_users(run_dir)
    levels = sorted(p95)
    below = levels[levels.index(max_conc) - 1]  # two levels under the knee
    cases = {
        "below": (below, "latency"),
        "before the knee": (max_conc, "latency"),  # the SLO allows exactly what the knee does
        "at": (knee_users, "throughput"),
    }
    if knee_users != levels[-1]:
        cases["above"] = (levels[levels.index(knee_users) + 1], "throughput")
    for name, (capacity, binding) in cases.items():
        nxt = [u for u in levels if u > capacity]
        worst_in = max(p95[u] for u in levels if u <= capacity)
        limit = _between(worst_in, min(p95[u] for u in nxt)) if nxt else worst_in * 1.5
        params = SloParams(slos=(parse_slo(f"e2e_p95_ms={limit:.1f}"),))
        analysis = analyze_run(run_dir, slo_params=params)
        slo = analysis.slo
        assert slo is not None
        # verdicts and the knee do not move when SLOs are given
        assert [v.verdict for v in analysis.knee.stages] == [v.verdict for v in plain.knee.stages]
        assert (slo.capacity, slo.binding) == (capacity, binding), (name, slo.first_broken, p95)
        text = slo_text(slo)
        assert f"e2e P95 ≤ {float(f'{limit:.1f}'):g} ms" in text  # the limits used are printed
        assert summary_text(slo) in text  # the capacity and what binds (words: slo_words golden)
        paths = write_report(analysis, tmp_path / name.replace(" ", "-"))
        yaml_text = paths["recommendations.yaml"].read_text()
        assert f"slo_capacity: {capacity}" in yaml_text
        assert f'binding_constraint: "{binding}"' in yaml_text
        doc = json.loads(paths["knee.json"].read_text())
        assert (doc["slo"]["capacity"], doc["slo"]["binding"]) == (capacity, binding)
        assert "SLO capacity and goodput" in paths["report.html"].read_text()
        interactive = analysis.recommendations.get("interactive_max_concurrency")
        assert interactive <= capacity


def test_goodput_equals_a_hand_count_for_every_stage(run_dir: Path):
    p95 = _p95_by_users(run_dir)
    threshold = p95[4]  # about half the requests of the deeper stages are good
    params = SloParams(goodput=parse_goodput(f"e2e_ms={threshold}"), goodput_min_pct=95.0)
    analysis = analyze_run(run_dir, slo_params=params)
    assert analysis.slo is not None
    requests = pd.read_csv(run_dir / "requests.csv")
    stages = pd.read_csv(run_dir / "stages.csv").set_index("stage")
    judged_stages = {s.stage: s for s in analysis.slo.stages}
    assert sorted(judged_stages) == sorted(stages.index[stages["kind"] == "step"])
    fractions = []
    for stage, judged in judged_stages.items():
        rows = requests[(requests["stage"] == stage) & (requests["phase"] == "measure")]
        rows = rows[(rows["outcome"] != "length_mismatch") & (rows["length_ok"] != 0)]
        good = rows[(rows["outcome"] == "ok") & (rows["e2e_ms"] <= threshold)]
        window = stages.at[stage, "measure_end_unix_s"] - stages.at[stage, "warmup_end_unix_s"]
        assert judged.good_requests == len(good)
        assert judged.judged_requests == len(rows)
        assert judged.good_pct == pytest.approx(100.0 * len(good) / len(rows))
        assert judged.goodput_rps == pytest.approx(len(good) / window)
        assert judged.good_output_tok_s == pytest.approx(good["completion_tokens"].sum() / window)
        fractions.append(len(good) / len(rows))
        assert judged.met == (judged.good_pct >= 95.0)
    assert min(fractions) < 0.95 < max(fractions)  # the threshold splits the sweep
