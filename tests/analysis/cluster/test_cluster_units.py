"""The cluster files' pure parts: power readings on every path, fits against numpy, YAML, --emit."""

from __future__ import annotations

import math
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from analysis.cluster import alerts, autoscale, energy
from analysis.cluster.autoscale import quantity
from analysis.cluster.emit import NAMES, parse_emit
from analysis.cluster.profile import fit_line
from analysis.cluster.yamlblock import Commented, dump
from analysis.inputs.nvsmi import read_nvidia_smi_csv
from analysis.pipeline import analyze_run
from loadknee_core import contract, dcgm
from loadknee_core.promtext import Sample
from loadknee_locust.sim.engine import Engine
from loadknee_locust.sim.metrics import EngineCollector, build_registry, render
from loadknee_locust.sim.params import SimParams
from loadknee_locust.sim.telemetry import power_w
from loadknee_locust.telemetry.nvml import NvmlReader
from tests.support.fake_nvml import FakeNvml
from tests.support.report_fixtures import write_run_dir


def test_nvml_power_usage_milliwatts_become_watts_and_unsupported_is_empty() -> None:
    fake = FakeNvml()
    reader = NvmlReader(nvml=fake)
    assert reader.open() == 2
    assert [row["power_w"] for row in reader.sample(1.0)] == [71.5, 252.0]
    fake.power_unsupported = True
    assert [row["power_w"] for row in reader.sample(2.0)] == [None, None]


def test_dcgm_power_field_maps_to_power_w() -> None:
    rows = dcgm.gpu_rows([Sample(dcgm.POWER_USAGE, {"gpu": "0"}, 153.25)], 5.0)
    assert rows[0]["power_w"] == 153.25


def test_nvidia_smi_power_draw_is_read_with_its_unit(tmp_path) -> None:
    capture = tmp_path / "smi.csv"
    capture.write_text(
        "timestamp, memory.used [MiB], memory.total [MiB], utilization.gpu [%], power.draw [W]\n"
        "2024/05/01 12:00:00.500, 10240 MiB, 81920 MiB, 35 %, 212.40 W\n"
        "2024/05/01 12:00:01.000, 10240 MiB, 81920 MiB, 35 %, [N/A]\n"
    )
    frame = read_nvidia_smi_csv(capture, tz="UTC")
    assert frame["power_w"].iloc[0] == 212.4 and math.isnan(frame["power_w"].iloc[1])


def test_the_simulator_exports_its_power_model_on_the_dcgm_endpoint() -> None:
    params = SimParams(power_idle_w=55.0, power_per_seq_w=12.5)
    assert power_w(params, 4) == 105.0 and power_w(params, 4, up=False) == 0.0
    registry = build_registry()
    registry.register(EngineCollector(Engine(params)))
    text = render(registry).decode()
    (sample,) = [
        s
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "DCGM_FI_DEV_POWER_USAGE"
    ]
    assert sample.value == 55.0 and sample.labels["gpu"] == "0"  # idle: nothing running


def test_energy_from_nvml_power_through_the_fake(tmp_path) -> None:
    root = write_run_dir(tmp_path / "run", levels=(1, 2, 4, 8), slots=4)
    gpu = pd.read_csv(root / contract.GPU_CSV)
    fake = FakeNvml(used_mib=[0.0], total_mib=[81920.0], util=[(0, 0)], power_mw=[0])
    reader = NvmlReader(nvml=fake)
    reader.open()
    power = []
    for used in gpu["memory_used_mib"]:
        running = (used - 40000) / 2000  # the fixture's memory model
        fake.power_mw = [int((80 + 25 * running) * 1000)]
        power.append(reader.sample(0.0)[0]["power_w"])
    gpu = gpu.assign(power_w=power, source="nvml")
    gpu[list(contract.GPU_COLUMNS)].to_csv(root / contract.GPU_CSV, index=False)
    analysis = analyze_run(root)
    e = energy.energy(analysis)
    assert e.source == "nvml"
    stages = pd.read_csv(root / contract.STAGES_CSV).set_index("stage")
    for row in e.stages.itertuples(index=False):
        lo, hi = stages.loc[row.stage, ["warmup_end_unix_s", "measure_end_unix_s"]]
        inside = gpu[(gpu["timestamp_unix_s"] >= lo) & (gpu["timestamp_unix_s"] <= hi)]
        model = (80 + 25 * (inside["memory_used_mib"] - 40000) / 2000).mean()
        assert row.power_mean_w == pytest.approx(model, rel=1e-6), row
        assert row.output_tokens_per_j == pytest.approx(row.output_tok_s / row.power_mean_w)
    assert "output_tokens_per_j" in energy.energy_yaml(analysis)


def test_an_old_gpu_csv_without_power_still_loads_and_says_so(tmp_path) -> None:
    root = write_run_dir(tmp_path / "run", levels=(1, 2, 4))
    gpu = pd.read_csv(root / contract.GPU_CSV).drop(columns=["power_w"])
    gpu.to_csv(root / contract.GPU_CSV, index=False)
    e = energy.energy(analyze_run(root))
    assert e.source == "" and e.why == energy.NO_POWER
    assert e.stages["power_mean_w"].isna().all()


def test_fit_line_matches_numpy_and_says_why_it_cannot_fit() -> None:
    rng = np.random.default_rng(3)
    x = np.array([1.0, 2, 4, 6, 8, 8, 8])
    y = 10 + 2 * x + rng.normal(0, 0.1, len(x))
    fit = fit_line(x, y)
    slope, intercept = np.polyfit(x, y, 1)
    assert fit.slope == pytest.approx(slope) and fit.intercept == pytest.approx(intercept)
    assert fit.slope_ci[0] < 2 < fit.slope_ci[1]
    assert sum(fit.residuals) == pytest.approx(0, abs=1e-9) and fit.kind == "fitted"
    flat = fit_line(np.full(5, 3.0), y[:5])
    assert flat.kind == "no-spread" and flat.slope is None and flat.why
    short = fit_line(x[:2], y[:2])
    assert short.kind == "too-few-points" and short.slope is None


def test_yaml_block_reads_back_with_comments_kept() -> None:
    why, first = "why: a # comment", "first"
    doc = {
        "a": Commented({"b": [1, 2.5, None], "c": 'say "no": #x'}, (why,)),
        "items": [Commented({"name": "w", "n": 0.125}, (first,)), {"name": "yes"}],
        "empty": {},
    }
    text = dump(doc, header=["header line"])
    assert f"# {why}" in text and f"# {first}" in text
    assert yaml.safe_load(text) == {
        "a": {"b": [1, 2.5, None], "c": 'say "no": #x'},
        "items": [{"name": "w", "n": 0.125}, {"name": "yes"}],
        "empty": {},
    }


def test_emit_names_and_quantities() -> None:
    assert parse_emit("all") == NAMES and parse_emit("none") == ()
    assert parse_emit("keda, hpa,keda") == ("keda", "hpa")
    with pytest.raises(ValueError, match="unknown bogus"):
        parse_emit("keda,bogus")
    assert [quantity(v) for v in (3.0, 0.5, 0.0591, 1e-6)] == ["3", "500m", "59m", "1m"]


def test_synthetic_run_gives_valid_manifests_and_rules(tmp_path) -> None:
    """The fast path (no simulator): the closed-form fixture server with 8 slots."""
    analysis = analyze_run(write_run_dir(tmp_path / "run", levels=(1, 2, 4, 8, 16, 32), slots=8))
    keda = yaml.safe_load(autoscale.scaled_object(analysis))
    assert keda["kind"] == "ScaledObject" and keda["spec"]["triggers"]
    queries = [t["metadata"]["query"] for t in keda["spec"]["triggers"]]
    assert any("vllm:num_requests_waiting" in q for q in queries), queries
    hpa = yaml.safe_load(autoscale.hpa(analysis))
    assert hpa["apiVersion"] == "autoscaling/v2" and len(hpa["spec"]["metrics"]) == len(queries)
    rules = alerts.rules_yaml(analysis)
    if shutil.which("promtool"):
        path = tmp_path / "rules.yaml"
        path.write_text(rules)
        done = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True,
                              text=True, timeout=60, check=False)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    assert "LLMServerAtKnee" in rules


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool missing (Debian prometheus)")
def test_promtool_unit_tests_fire_each_load_rule_above_its_limit_only(tmp_path) -> None:
    """``promtool test rules`` on synthetic series: below the limit nothing, above it the alert."""
    analysis = analyze_run(write_run_dir(tmp_path / "run", levels=(1, 2, 4, 8, 16, 32), slots=8))
    (tmp_path / "rules.yaml").write_text(alerts.rules_yaml(analysis))
    rules = yaml.safe_load((tmp_path / "rules.yaml").read_text())["groups"][0]["rules"]
    tests = []
    for rule in rules:
        found = re.fullmatch(r"avg\(avg_over_time\((.+)\[1m\]\)\) > ([0-9.]+)", rule["expr"])
        if not found:
            continue  # the latency rules read a histogram: exercised live in test_cluster_sim
        series, limit = found.group(1), float(found.group(2))
        low, high = limit * 0.9, limit * 1.1 + 0.1
        tests.append(
            {
                "interval": "1m",
                "input_series": [{"series": series, "values": f"{low}x10 {high}x20"}],
                "alert_rule_test": [
                    {"eval_time": "9m", "alertname": rule["alert"], "exp_alerts": []},
                    {
                        "eval_time": "20m",
                        "alertname": rule["alert"],
                        "exp_alerts": [
                            {"exp_labels": rule["labels"], "exp_annotations": rule["annotations"]}
                        ],
                    },
                ],
            }
        )
    assert {t["alert_rule_test"][0]["alertname"] for t in tests} == {
        "LLMServerPastWatermark",
        "LLMServerAtKnee",
    }
    spec = tmp_path / "rules_test.yaml"
    spec.write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "tests": tests}))
    done = subprocess.run(["promtool", "test", "rules", str(spec)], capture_output=True,
                          text=True, timeout=60, check=False, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_shared_figures_are_computed_once_per_analysis(tmp_path) -> None:
    """The files share one analysis's gauges and anchors; another analysis gets its own, and
    the memo keeps no analysis alive."""
    import dataclasses
    import gc
    import weakref

    from analysis.cluster.memo import per_analysis
    from analysis.cluster.stages import anchors, measured_windows, stage_gauges

    analysis = analyze_run(write_run_dir(tmp_path / "run", levels=(1, 2, 4, 8, 16)))
    gauges = stage_gauges(analysis)
    assert stage_gauges(analysis) is gauges and anchors(analysis) is anchors(analysis)
    assert measured_windows(analysis) is measured_windows(analysis)
    fewer = dataclasses.replace(analysis, summary=analysis.summary.iloc[:3])
    assert sorted(stage_gauges(fewer)) == sorted(gauges)[:3]  # not the first one's
    assert sorted(stage_gauges(analysis)) == sorted(gauges)

    calls = []
    counted_stages = per_analysis(lambda a: calls.append(a) or len(a.summary))
    assert [counted_stages(fewer), counted_stages(fewer), counted_stages(analysis)] == [3, 3, 6]
    assert len(calls) == 2
    calls.clear()
    gone = weakref.ref(fewer)
    del fewer
    gc.collect()
    assert gone() is None
