"""Two traffic classes in one run (``--llm-classes``) on the simulator, each with its own SLO.

``chat`` (70 %, 128 → 8 tokens, TTFT P95 ≤ 1 s) and ``summ`` (30 %, 512 → 32 tokens, e2e P95
≤ 1 s) on 8 slots whose decode step slows by 2 ms per running sequence. Checked by hand from
``requests.csv`` and ``stages.csv``: every stage's measured class shares are within 3 points of
the weights; each class's SLO capacity is the rule (the highest level of the unbroken run of
passing stages from the lowest) applied to that class's measured served rows alone; the
binding class is the one with the lowest capacity, named in the report. Run with ``--workers 2``
(each worker draws from its own weighted cycle; one process passed too: kept to one run for the
suite's time).
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.pipeline import analyze_run
from analysis.report.slo_words import classes_text
from analysis.report.workload import workload_html
from analysis.report.writer import record_markdown
from analysis.slo.classes import analyze_classes
from loadknee_locust.sim.launch import SimProcess

pytestmark = pytest.mark.slow

LEVELS = (4, 8, 16)
CLASSES = "chat:70:128:8:ttft_p95_ms=1000 summ:30:512:32:e2e_p95_ms=1000"
WEIGHTS = {"chat": 70.0, "summ": 30.0}
LIMITS = {"chat": ("ttft_ms", 1000.0), "summ": ("e2e_ms", 1000.0)}


@pytest.fixture(scope="module", params=[2], ids=["workers2"])  # local: the other sim tests
def run_dir(request, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("classes")
    with SimProcess.start("fast", max_num_seqs=8, decode_per_seq_ms=2.0) as sim:
        args = [
            sys.executable, "-m", "loadknee_locust", "run", "--no-analyze", "--host", sim.url,
            "--levels", ",".join(map(str, LEVELS)), "--stage-seconds", "6",
            "--warmup-seconds", "0.5", "--cooldown-seconds", "0.5", "--baseline-requests", "6",
            "--llm-classes", CLASSES, "--out", str(out), "--run-id", "mix",
            "--no-refine", "--stop-after-knee", "-1", "--workers", str(request.param),
            "--no-concurrency-probe",  # tests the classes, not loadknee predict: skip its ~2 s
        ]  # fmt: skip
        done = subprocess.run(args, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out / "mix"


def _by_hand(run_dir: Path) -> tuple[pd.DataFrame, dict[str, int | None]]:
    rows = pd.read_csv(run_dir / "requests.csv", dtype={"traffic_class": "string"})
    stages = pd.read_csv(run_dir / "stages.csv").set_index("stage")
    measured = rows[rows["phase"] == "measure"]
    capacity: dict[str, int | None] = {}
    for name, (column, limit) in LIMITS.items():
        cap = None
        for stage in stages.index[stages["kind"] == "step"]:
            ok = measured[(measured["stage"] == stage) & (measured["traffic_class"] == name)
                          & (measured["outcome"] == "ok")]  # fmt: skip
            p95 = np.quantile(ok[column].dropna().to_numpy(), 0.95)
            if p95 > limit:
                break
            cap = int(stages.at[stage, "target_users"])
        capacity[name] = cap
    return measured, capacity


def test_class_shares_follow_the_weights(run_dir: Path) -> None:
    measured, _ = _by_hand(run_dir)
    assert set(measured["traffic_class"].dropna()) == set(WEIGHTS)
    for stage, group in measured.groupby("stage"):
        assert len(group) >= 60, stage  # one request is under 2 points of a share
        shares = group["traffic_class"].value_counts(normalize=True) * 100
        for name, weight in WEIGHTS.items():
            assert shares[name] == pytest.approx(weight, abs=3.0), (stage, shares.to_dict())
    # the lengths are each class's own
    ok = measured[measured["outcome"] == "ok"]
    for name, (inp, out) in {"chat": (128, 8), "summ": (512, 32)}.items():
        mine = ok[ok["traffic_class"] == name]
        assert (mine["prompt_tokens"] == inp).all() and (mine["completion_tokens"] == out).all()


def test_each_class_capacity_is_the_rule_on_its_own_rows(run_dir: Path) -> None:
    _, capacity = _by_hand(run_dir)
    analysis = analyze_run(run_dir)
    result = analyze_classes(analysis.run, analysis.knee)
    assert result is not None
    found = {r.spec.name: r.capacity for r in result.classes}
    assert found == capacity
    lowest = min(capacity, key=lambda n: capacity[n] or 0)
    if len({c or 0 for c in capacity.values()}) == 2:  # the capacities differ: no tie-break
        assert result.binding == lowest
    # record.md carries the classes' lines, which name the binding class
    words = classes_text(result)
    assert result.binding in words and words.replace("\n", "  \n") in record_markdown(analysis)
    assert capacity["summ"] != capacity["chat"] or result.binding == "chat"


def test_knee_json_and_the_html_report_carry_each_class(run_dir: Path, tmp_path: Path) -> None:
    import json

    from analysis.report.writer import write_report

    measured, capacity = _by_hand(run_dir)
    paths = write_report(analyze_run(run_dir), tmp_path)
    section = json.loads(paths["knee.json"].read_text())["classes"]
    found = {c["name"]: c for c in section["classes"]}
    assert {n: c["slo_capacity"] for n, c in found.items()} == capacity
    assert section["binding"] == min(capacity, key=lambda n: (capacity[n] or 0, n != "chat"))
    stages = pd.read_csv(run_dir / "stages.csv").set_index("stage")
    for name, (column, limit) in LIMITS.items():
        for row in found[name]["stages"]:
            if stages.at[row["stage"], "kind"] != "step":
                continue
            mine = measured[(measured["stage"] == row["stage"])
                            & (measured["traffic_class"] == name)]  # fmt: skip
            ok = mine[mine["outcome"] == "ok"]
            assert row["ok"] == len(ok)  # the class's own rows, per stage
            assert row["share_pct"] == pytest.approx(WEIGHTS[name], abs=3.0)
            p95 = float(np.quantile(ok[column].dropna().to_numpy(), 0.95))
            assert row["slo_met"] == (p95 <= limit), (name, row)
    # the page's workload section: the classes' lines, then a heading per class, the binding
    # one's marked (it differs from the same heading when no class binds)
    page = paths["report.html"].read_text()
    workload = page.split('<section id="workload">', 1)[1].split("</section>", 1)[0]
    assert all(f"<p>{html.escape(line)}</p>" in workload for line in section["text"].splitlines())
    unbound = workload_html({"classes": {**section, "binding": None}})
    heads, plain = (dict(re.findall(r"<h4>(\w+)(.*?)</h4>", p)) for p in (workload, unbound))
    assert set(heads) == set(found) == set(plain)
    assert {n for n in heads if heads[n] != plain[n]} == {section["binding"]}
