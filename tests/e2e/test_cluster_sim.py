"""The cluster files on a real simulator sweep: schemas, engine names, thresholds, fits, energy.

One streamed sweep of ``loadknee sim`` (8 slots, ``decode_per_seq_ms`` 1 so the step time
grows visibly with the batch while 8 users' tail stays clear of the 2x limit: at 2 ms a step
put it at 1.95x, "up to 2.19x", and under a CPU hog the run rightly said it could not tell
(fresh #25); the power model on its DCGM endpoint) is driven once for the
module (tests/support/knee_simdriver.py, ~15 s) and analysed three ways: as scraped (vLLM names),
with
its server metrics renamed to llama.cpp's, and without ``server_metrics.csv`` at all. The alert
rules are also exercised live: Debian's Prometheus scrapes the simulator through a second sweep
and the warning must fire only past the watermark, the critical only at or past the knee. Every
file
is checked against its schema: KEDA's CRD schema (vendored, tests/support/data/schemas), the
autoscaling/v2 schema through kubernetes-validate, llm-d's benchmark report v0.2 (rebuilt from
its models), and ``promtool check rules`` where Debian's prometheus package is installed.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator

import jsonschema
import kubernetes_validate
import pandas as pd
import pytest
import yaml

from analysis.cli import main
from analysis.cluster import alerts, autoscale, energy, llmd, profile
from analysis.cluster.engines import detect_engine
from analysis.cluster.plan import AlertParams
from analysis.cluster.stages import anchors
from analysis.pipeline import Analysis, analyze_run
from analysis.report.knee_summary import summary_words
from analysis.report.table import record_frame
from loadknee_core.numeric import counted
from loadknee_locust.sim.launch import SimProcess
from tests.support.knee_simdriver import DriveSpec, drive_sim
from tests.support.late_client import late_cannot_tell
from tests.support.paths import DATA
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

SCHEMAS = DATA / "schemas"
SIM = {
    "decode_base_ms": 10.0,
    "decode_per_seq_ms": 1.0,
    "power_idle_w": 60.0,
    "power_per_seq_w": 20.0,
}
LEVELS = (2, 4, 6, 8, 12)
SPEC = DriveSpec(levels=LEVELS, input_tokens=64, output_tokens=32, warmup_s=0.4, measure_s=1.8,
                 baseline_requests=8, stream=True, scrape_s=0.1)  # fmt: skip
LLAMA_NAMES = {
    "vllm:num_requests_running": "llamacpp:requests_processing",
    "vllm:num_requests_waiting": "llamacpp:requests_deferred",
}


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    with SimProcess.start("fast", **SIM) as process:
        yield process


@pytest.fixture(scope="module")
def runs(sim, tmp_path_factory) -> dict[str, Analysis]:
    root = tmp_path_factory.mktemp("cluster")
    drive_sim(sim.url, SPEC, root / "vllm", sim_preset="fast")
    llama = shutil.copytree(root / "vllm", root / "llama")
    metrics = pd.read_csv(llama / "server_metrics.csv")
    metrics = metrics[~metrics["metric"].astype(str).str.startswith("vllm:kv_cache")]
    metrics["metric"] = metrics["metric"].replace(LLAMA_NAMES)
    metrics.to_csv(llama / "server_metrics.csv", index=False)
    bare = shutil.copytree(root / "vllm", root / "bare")
    (bare / "server_metrics.csv").unlink()
    return {name: analyze_run(root / name) for name in ("vllm", "llama", "bare")}


def _keda_schema() -> dict:
    """KEDA's CRD schema, strict: an object with properties allows no others (kubeconform's
    --strict reading of a CRD), so a misspelt field fails here as it would on the cluster."""
    schema = yaml.safe_load((SCHEMAS / "keda_scaledobject_v1alpha1.yaml").read_text())

    def strict(node: object) -> None:
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                strict(value)
        elif isinstance(node, list):
            for value in node:
                strict(value)

    strict(schema)
    schema["properties"]["metadata"]["additionalProperties"] = True
    return schema


def _comments(text: str) -> str:
    """A YAML file's comment lines, joined (the evidence each threshold carries)."""
    return " ".join(line.strip()[1:] for line in text.splitlines() if line.strip().startswith("#"))


def _compact(text: str) -> str:
    """``text`` without whitespace: comment lines wrap wherever they like, hyphens included."""
    return "".join(text.split())


def _summary_row(analysis: Analysis, stage: int) -> pd.Series:
    return analysis.summary.set_index("stage").loc[stage]


def test_keda_and_hpa_validate_and_carry_the_measured_vllm_thresholds(runs) -> None:
    a = runs["vllm"]
    keda = yaml.safe_load(autoscale.scaled_object(a))
    jsonschema.Draft7Validator(_keda_schema()).validate(keda)
    hpa = yaml.safe_load(autoscale.hpa(a))
    kubernetes_validate.validate(hpa, "1.30", strict=True)
    marks = anchors(a)
    assert marks.watermark is not None and marks.knee is not None
    band = a.recommendations.get("production_watermark")
    assert marks.watermark.users <= band[1] < marks.knee.users
    wm, knee = _summary_row(a, marks.watermark.stage), _summary_row(a, marks.knee.stage)
    triggers = {t["name"]: t["metadata"] for t in keda["spec"]["triggers"]}
    assert "vllm:num_requests_waiting" in triggers["waiting"]["query"]
    assert "vllm:kv_cache_usage_perc" in triggers["kv-cache"]["query"]
    # the summary computes these figures on its own: the thresholds must match it
    expected_wait = (wm["waiting_mean"] + knee["waiting_mean"]) / 2
    assert float(triggers["waiting"]["threshold"]) == pytest.approx(expected_wait, abs=1e-3)
    assert float(triggers["running"]["threshold"]) == pytest.approx(wm["running_mean"], abs=1e-3)
    assert knee["waiting_mean"] > 0.5  # the knee of an 8-slot server queues
    names = {m["external"]["metric"]["name"] for m in hpa["spec"]["metrics"]}
    assert {"vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} <= names
    # each trigger carries its evidence above it; the queue's cites the watermark, then the knee
    evidence = {t.name: t.evidence for t in autoscale.triggers(a, marks)[1]}
    said = _compact(_comments(autoscale.scaled_object(a)))
    assert evidence and all(_compact(e) in said for e in evidence.values())
    wait = evidence["waiting"]
    at_wm, at_knee = counted(marks.watermark.users, "user"), counted(marks.knee.users, "user")
    assert at_wm in wait and at_knee in wait and wait.index(at_wm) < wait.index(at_knee)


def test_llama_server_names_and_no_kv_trigger(runs) -> None:
    a = runs["llama"]
    keda = yaml.safe_load(autoscale.scaled_object(a))
    jsonschema.Draft7Validator(_keda_schema()).validate(keda)
    kubernetes_validate.validate(yaml.safe_load(autoscale.hpa(a)), "1.30", strict=True)
    queries = " ".join(t["metadata"]["query"] for t in keda["spec"]["triggers"])
    assert "llamacpp:requests_deferred" in queries and "llamacpp:requests_processing" in queries
    assert "vllm" not in queries and "kv" not in queries
    # no latency rule, and the rule file's header says why (the engine exports no histogram)
    engine = detect_engine(a.run.server_metrics)
    assert engine is not None and engine.latency_histogram is None
    latency, left_out = alerts.latency_rules(a, AlertParams())
    assert latency == [] and len(left_out) == 1
    written = alerts.rules_yaml(a)
    assert "LLMLatency" not in written and _compact(left_out[0]) in _compact(_comments(written))


def test_without_server_metrics_the_gateway_must_export_the_client_figure(runs) -> None:
    a = runs["bare"]
    text = autoscale.scaled_object(a)
    keda = yaml.safe_load(text)
    jsonschema.Draft7Validator(_keda_schema()).validate(keda)
    kubernetes_validate.validate(yaml.safe_load(autoscale.hpa(a)), "1.30", strict=True)
    (trigger,) = keda["spec"]["triggers"]
    assert trigger["metadata"]["query"] == f"sum({autoscale.GATEWAY_METRIC})"
    high = anchors(a).watermark_range[1]
    assert float(trigger["metadata"]["threshold"]) == high
    # the one trigger is the gateway's placeholder, and its comment says so above it
    (gateway,) = autoscale.triggers(a)[1]
    assert (gateway.name, gateway.metric) == ("gateway", autoscale.GATEWAY_METRIC)
    assert autoscale.GATEWAY_METRIC in gateway.evidence
    assert _compact(gateway.evidence) in _compact(_comments(text))


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool missing (Debian package prometheus)"
)
@pytest.mark.parametrize("name", ["vllm", "llama", "bare"])
def test_promtool_accepts_the_rules(runs, name, tmp_path) -> None:
    path = tmp_path / "alerts.rules.yaml"
    path.write_text(alerts.rules_yaml(runs[name]))
    done = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rules = yaml.safe_load(path.read_text())["groups"][0]["rules"]
    severities = {r["labels"]["severity"] for r in rules}
    assert severities == {"warning", "critical"}


def test_profile_recovers_the_simulators_step_cost(runs) -> None:
    # the line is on each stage's TPOT: the simulator's step 10 + 1 × batch ms, plus its 64-token
    # prefills' 0.02 ms a token spread over 32 steps (β ~1.04); its median chunk gap drifted
    # under the step at the larger batches on a busy machine (β 0.87 and 0.89 in two CI runs)
    # on a busy machine the stages whose load generator ran late are left out of the fit (their
    # ITL is the client's); too few left to fit is right only where the run says it cannot tell
    late = profile.late_stages(runs["vllm"])
    fit = profile.fit_profile(runs["vllm"])
    d = fit.decode
    if d.intercept is None and late and late_cannot_tell(runs["vllm"]):
        assert len(fit.decode_points) < 3, fit.decode_points
        return
    assert d.intercept is not None and d.slope is not None, d.why
    explain = f"alpha {d.intercept:.3f}, beta {d.slope:.4f}\n{fit.decode_points}"
    assert d.intercept == pytest.approx(SIM["decode_base_ms"], rel=0.10), explain
    assert d.slope == pytest.approx(SIM["decode_per_seq_ms"], rel=0.10), explain
    assert d.slope_ci[0] < d.slope < d.slope_ci[1]
    assert fit.saturation_batch == 8
    doc = yaml.safe_load(profile.profile_yaml(runs["vllm"]))
    assert doc["decode"]["beta_ms_per_seq"] == pytest.approx(d.slope, abs=1e-4)
    # and the baseline; a stage whose tokens came in bursts (a starved simulator catching up)
    # is left out and named
    bursty = doc["decode"].get("left_out_bursty_stages", [])
    assert bursty == list(fit.bursty_stages)
    starved = doc["decode"].get("left_out_starved_stages", [])  # served less at a larger batch
    assert starved == list(fit.starved_stages)
    left_out = len(late) + len(bursty) + len(starved)
    assert len(doc["decode"]["stages"]) == len(LEVELS) + 1 - left_out
    assert doc["prefill"]["not_fitted"]  # fixed 64-token prompts: no spread to fit on
    bare = profile.fit_profile(runs["bare"])
    assert bare.batch_source == "users" and set(bare.decode_points["users"]) < {1, *LEVELS}


def test_tokens_per_joule_equal_the_power_model(runs) -> None:
    a = runs["vllm"]
    e = energy.energy(a)
    assert e.source == "dcgm"
    for row in e.stages.itertuples(index=False):
        summary = _summary_row(a, int(row.stage))
        model_w = SIM["power_idle_w"] + SIM["power_per_seq_w"] * summary["running_mean"]
        model = summary["output_tok_s"] / model_w
        assert row.output_tokens_per_j == pytest.approx(model, rel=0.02), row
    knee_row = e.stages[e.stages["users"] == a.knee.knee_users].iloc[0]
    assert e.knee_users_per_kw == pytest.approx(a.knee.knee_users / knee_row.power_mean_w * 1000)
    assert energy.energy(runs["bare"]).source == ""  # no gpu.csv, no DCGM: said, not 0


def test_llmd_reports_validate_and_import_back_to_the_record_table(runs, tmp_path, capsys) -> None:
    a = runs["vllm"]
    schema = yaml.safe_load((SCHEMAS / "llmd_benchmark_report_v0_2.yaml").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    files = llmd.export_reports(a)
    assert len(files) == len(a.summary)
    for name, text in files.items():
        doc = yaml.safe_load(text)
        errors = [e.message for e in validator.iter_errors(doc)]
        assert not errors, (name, errors)
        (tmp_path / name).write_text(text)
    broken = yaml.safe_load(next(iter(files.values())))
    broken["results"]["request_performance"]["aggregate"]["latency"]["made_up"] = {}
    assert not validator.is_valid(broken)  # the schema does forbid unknown fields
    imported, imported_knee = llmd.record_table(sorted(tmp_path.glob("*.yaml")))
    original = record_frame(a.summary, a.knee)
    columns = [c for _f, (_u, m) in llmd.LATENCY_FIELDS.items() for c in m.values()]
    columns += ["stage", "target_users", "requests", "errors", "qps", "output_tok_s",
                "total_tok_s", "window_s", "success_pct"]  # fmt: skip
    pd.testing.assert_frame_equal(
        imported[columns].reset_index(drop=True),
        original[columns].reset_index(drop=True),
        check_dtype=False,
        rtol=1e-9,
    )
    assert list(imported["kind"]) == list(original["kind"])
    assert llmd.main([str(p) for p in sorted(tmp_path.glob("*.yaml"))]) == 0
    # main prints the knee of the table it read back. That table has no per-request rows and
    # no server gauges, so its knee rests on the fit alone and may differ from the run's own
    # (known: it reads 8 slots as max 6 here); the round trip above is what must be exact.
    said = capsys.readouterr().out
    assert imported_knee.knee_users is not None, said
    assert said.rstrip("\n").splitlines()[-1] == "knee: " + summary_words(imported_knee), said


def test_analyze_emit_writes_lists_and_links_the_chosen_files(runs, tmp_path, capsys) -> None:
    run_dir = shutil.copytree(runs["vllm"].run.path, tmp_path / "run")
    assert main([str(run_dir), "--quiet", "--explain", "--emit", "keda,alerts,energy,llmd"]) == 0
    out = capsys.readouterr().out  # the file list is in --explain; the screen names the report
    report = run_dir / "report"
    for name in ("keda-scaledobject.yaml", "alerts.rules.yaml", "energy.yaml"):
        assert (report / name).is_file()
        assert f'href="{name}"' in (report / "report.html").read_text()
    assert not (report / "hpa.yaml").exists() and not (report / "latency-profile.yaml").exists()
    at = out.index("files in ")  # the list may wrap over several lines
    files_line = out[at : out.index("\n\n", at) if "\n\n" in out[at:] else len(out)]
    assert "keda-scaledobject.yaml" in files_line and "llm-d/ (" in files_line
    assert len(list((report / "llm-d").glob("*.yaml"))) == len(runs["vllm"].summary)
    # the page's cluster section: the links, then the energy table, a row per stage measured
    page = (report / "report.html").read_text()
    section = page.split('<section id="cluster">', 1)[1].split("</section>", 1)[0]
    assert 'href="energy.yaml"' in section
    stages = energy.energy(runs["vllm"]).stages
    assert section.count("<tr>") == len(stages) + 1  # the header and a row per stage
    assert not math.isnan(energy.energy(runs["vllm"]).stages["power_mean_w"].iloc[-1])


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=2) as resp:  # loopback only
        return json.loads(resp.read())


#: the alert rules' window here, and how late a firing can be seen after the window it was
#: judged on: one 250-ms evaluation, one 200-ms poll, and a little slack
ALERT_WINDOW_S, ALERT_LAG_S = 1.0, 0.5


@pytest.mark.skipif(
    shutil.which("prometheus") is None, reason="prometheus missing (Debian package prometheus)"
)
def test_live_prometheus_fires_warning_past_the_watermark_critical_at_the_knee(
    sim, runs, tmp_path
) -> None:
    a = runs["vllm"]
    marks = anchors(a)
    assert marks.watermark is not None and marks.knee is not None
    (tmp_path / "rules.yaml").write_text(
        alerts.rules_yaml(a, alerts.AlertParams(window=f"{ALERT_WINDOW_S:g}s", hold="0s"))
    )
    host = sim.url.removeprefix("http://")
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 250ms, evaluation_interval: 250ms}\n"
        "rule_files: [rules.yaml]\n"
        f"scrape_configs: [{{job_name: sim, static_configs: [{{targets: ['{host}']}}]}}]\n"
    )
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    command = [
        "prometheus",
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: list[tuple[float, str]] = []
    stop = threading.Event()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if _get(api + "/api/v1/targets")["data"]["activeTargets"][0]["health"] == "up":
                    break
            except (OSError, KeyError, IndexError, ValueError):
                pass
            assert time.monotonic() < deadline and server.poll() is None, "prometheus not up"
            time.sleep(0.2)

        def poll() -> None:
            while not stop.is_set():
                try:
                    found = _get(api + "/api/v1/alerts")["data"]["alerts"]
                except (OSError, KeyError, ValueError):
                    found = []
                now = time.time()
                seen.extend(
                    (now, x["labels"]["alertname"]) for x in found if x["state"] == "firing"
                )
                stop.wait(0.2)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        live = drive_sim(sim.url, SPEC, tmp_path / "live")
        stop.set()
        poller.join(5)
    finally:
        stop.set()
        server.terminate()
        server.wait(10)
    stages = pd.read_csv(live / "stages.csv")

    def users_at(stamp: float) -> int | None:
        """The stage whose steady state an alert seen at ``stamp`` was judged on: the rule's
        window wholly after the stage's warm-up. The driver restarts its users at each stage,
        and the burst queues for a scrape or two (7 waiting for one 250-ms sample at 8 users on
        8 slots); a 1-s window over two such bursts once fired the knee alert at 8 users, on
        samples the stage itself never held (ci53)."""
        settled = stages["warmup_end_unix_s"] + ALERT_WINDOW_S + ALERT_LAG_S
        inside = stages[(settled <= stamp) & (stamp <= stages["end_unix_s"])]
        return None if inside.empty else int(inside["target_users"].iloc[0])

    fired: dict[str, set[int]] = {}
    for stamp, name in seen:
        users = users_at(stamp)
        if users is not None:
            fired.setdefault(name, set()).add(users)
    explain = (
        f"fired by stage users: {fired}; watermark {marks.watermark.users}, knee {marks.knee.users}"
    )
    print(explain)  # shown with -s: which stages each alert fired in
    warning, critical = (
        fired.get("LLMServerPastWatermark", set()),
        fired.get("LLMServerAtKnee", set()),
    )
    assert warning and min(warning) > marks.watermark.users, explain
    assert critical and min(critical) >= marks.knee.users, explain
    # the latency rules may stay silent (their limits round up to the histogram's buckets),
    # but never fire early
    assert min(fired.get("LLMLatencyPastWatermark", {99})) > marks.watermark.users, explain
    assert min(fired.get("LLMLatencyAtKnee", {99})) >= marks.knee.users, explain
