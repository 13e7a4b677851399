"""Curve replay with real Locust against the simulator: the measured in-flight count follows the
log's curve (one process with plain ``locust -f locustfiles/curve_replay.py``, and two workers
with ``loadknee run --workers 2``), and the headroom a replay at several scales measures is the
one the simulator's saturation implies; with and without the server's /metrics.

Only a real run shows that Locust's users follow the log's curve in time (one process, and two
workers against a server without /metrics), that the web UI draws it live, and where the
simulator's saturation puts the headroom of a replay. The replay at scales is swept once, with
/metrics: its plan is the log's (fixed windows at fixed scales, nothing adapts to what it
measures), so its ``without-metrics`` case reads a copy of the same run as a server without
/metrics leaves it, every scrape a 404 (:func:`tests.support.run_support.without_server_metrics`):
the capacity, the verdicts past c*, the trace's headroom and breaking scale, and the printed lines
all come from that copy. The three replays run side by side (each waits on its log's clock)."""

from __future__ import annotations

import csv
import json
import math
import os
import sys
from pathlib import Path

import pytest

from analysis.inputs.load import read_run
from analysis.pipeline import analyze_run as load_analysis
from analysis.traffic import cli as trace_cli
from analysis.traffic.curve_headroom import tracking
from analysis.traffic.headroom import run_capacity
from loadknee_locust.sim.launch import SimProcess
from loadknee_locust.sim.params import preset
from loadknee_locust.sim.saturation import saturation_concurrency
from tests.support.late_client import late_cannot_tell
from tests.support.run_support import (
    child_env,
    locust_cmd,
    run,
    submitted,
    without_server_metrics,
)

pytestmark = pytest.mark.slow
EXAMPLE = str(Path(__file__).resolve().parents[2] / "locustfiles" / "curve_replay.py")
T0 = 1_767_603_600.0


def _triangle_log(path: Path, span: float = 1800.0, duration: float = 30.0) -> Path:
    """Requests of ``duration`` s started so that the number in flight rises 2 → 20 → 2."""
    rows, t, owed = [], 0.0, 0.0
    while t < span - duration:
        x = (t + duration / 2) / span
        owed += (2 + 18 * (1 - abs(2 * x - 1))) / duration
        while owed >= 1:
            rows.append({"timestamp": T0 + t, "duration_s": duration, "input_tokens": 32,
                         "output_tokens": 48})  # fmt: skip
            owed -= 1
        t += 1.0
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _windows_rms(run_dir: Path) -> tuple[float, float, list[tuple[float, float]]]:
    """RMS over windows of (measured mean in flight − the log's curve × scale), and the peak."""
    info = json.loads((run_dir / "run.json").read_text())
    with (run_dir / "stages.csv").open() as f:
        stages = list(csv.DictReader(f))
    with (run_dir / "requests.csv").open() as f:
        spans = [(float(r["start_unix_s"]), float(r["end_unix_s"])) for r in csv.DictReader(f)]
    windows = info["curve"]["windows"]
    assert len(stages) == len(windows)
    pairs = []
    for st, w in zip(stages, windows, strict=True):
        a, b = float(st["warmup_end_unix_s"]), float(st["measure_end_unix_s"])
        area = sum(max(0.0, min(b, e) - max(a, s)) for s, e in spans)
        pairs.append((float(w["curve_mean_users"]), area / (b - a)))
    rms = math.sqrt(sum((m - want) ** 2 for want, m in pairs) / len(pairs))
    return rms, float(info["curve"]["curve_peak_users"]), pairs


CURVE = ["--llm-time-scale", "90", "--llm-curve-window-seconds", "2"]
FOLLOW_CASES = [(0, True), (2, False)]


def _follow(workers: int, metrics: bool, folder: Path) -> tuple[Path, float]:
    """One replay of the triangle log: (its run dir, the 1-min load average as it ended)."""
    out = folder / f"w{workers}"
    log = _triangle_log(folder / f"prod-w{workers}.jsonl")
    common = [*CURVE, "--llm-replay-curve", str(log), "--llm-out", str(out),
              "--llm-run-id", "curve"]  # fmt: skip
    with SimProcess.start("fast", max_num_seqs=64, metrics=metrics) as sim:
        if workers:
            cmd = [sys.executable, "-m", "loadknee_locust", "run", "--no-analyze", "--host",
                   sim.url, "--workers", str(workers), "--no-preflight", "--", *common]  # fmt: skip
        else:
            cmd = locust_cmd("--headless", "--host", sim.url, "--stop-timeout", "30", *common,
                             locustfile=EXAMPLE)  # fmt: skip
        run(cmd, env=child_env(), timeout=120)
    return out / "curve", os.getloadavg()[0]


@pytest.fixture(scope="module")
def replays(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The file's three replays at once (the two curve-following ones and the scales replay):
    each waits on the log's clock (~30 s, a tenth of a core), so side by side they take the
    time of the longest instead of the sum."""
    folder = tmp_path_factory.mktemp("replays")
    cases = [("follow", *case) for case in FOLLOW_CASES] + [("scales", 0, True)]
    with submitted(_replay, cases, folder, 3) as futures:
        yield futures


def _replay(kind: str, workers: int, metrics: bool, folder: Path) -> tuple[Path, Path | float]:
    """A follow case's (run dir, load as it ended), or the scales replay's (log, run dir)."""
    if kind == "scales":
        return _scales_replay(folder)
    return _follow(workers, metrics, folder)


@pytest.mark.parametrize(
    ("workers", "metrics"), FOLLOW_CASES, ids=["local-metrics", "2workers-nometrics"]
)
def test_measured_in_flight_follows_the_logs_curve(replays, workers: int, metrics: bool) -> None:
    run_dir, load_after = replays[("follow", workers, metrics)].result()
    assert isinstance(load_after, float)
    rms, peak, pairs = _windows_rms(run_dir)
    assert 18 <= peak <= 21 and max(want for want, _ in pairs) > 15
    # the product's own check of the replay agrees with this test's computation
    tracked = tracking(read_run(run_dir))
    assert tracked is not None and tracked.rms == pytest.approx(rms, rel=1e-6, abs=1e-9)
    assert tracked.followed == (rms <= 0.10 * peak)
    if not tracked.followed:
        # right, or saying it cannot tell: a replay that fell behind the log is only accepted
        # when the product says so and the machine's CPUs were oversubscribed by others
        cores = os.cpu_count() or 1
        assert load_after > cores, (f"in flight off by RMS {rms:.2f} (> 10 % of {peak:.1f}) "
                                    f"on a machine not oversubscribed: {pairs}")  # fmt: skip
        # its fact, tracked.followed, is checked above; the trace prints this line for a reader
        # words are the product — the line saying the replay cannot be trusted
        assert "did NOT follow" in tracked.text
    info = json.loads((run_dir / "run.json").read_text())
    assert info["prompt_source"]["kind"] == "curve"
    assert info["curve"]["log_sha256"] and "prompt" not in json.dumps(info["curve"]).lower()
    with (run_dir / "requests.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["outcome"] for r in rows} == {"ok"}
    # the logged lengths (48 out: requests long enough that two busy workers keep up)
    assert {(r["target_input_tokens"], r["target_output_tokens"]) for r in rows} == {("32", "48")}
    source = info["prompt_source"]
    assert source["records_sent"] + source["records_reused"] == len(rows)  # one draw per request
    if workers:
        assert {r["worker"] for r in rows} == {"0", "1"}


def _plateau_log(path: Path, level: int = 3, span: float = 360.0, duration: float = 20.0) -> Path:
    rows = []
    for lane in range(level):
        t = lane * duration / level
        while t + duration <= span:  # the last ends by the span's end: whole windows
            rows.append({"timestamp": T0 + t, "duration_s": duration, "input_tokens": 64,
                         "output_tokens": 32})  # fmt: skip
            t += duration
    rows.sort(key=lambda r: r["timestamp"])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


SLOTS, PEAK, SCALES = 4, 3, (1.0, 2.0, 4.0)


def _scales_replay(folder: Path) -> tuple[Path, Path]:
    """(the plateau log, the run dir of its replay at SCALES against SLOTS slots, with /metrics)."""
    out = folder / "scales"
    out.mkdir()
    log = _plateau_log(out / "prod.jsonl", level=PEAK)
    with SimProcess.start("fast", max_num_seqs=SLOTS, allow_control=True) as sim:
        cmd = locust_cmd(
            "--headless", "--host", sim.url, "--stop-timeout", "30", "--llm-replay-curve",
            str(log), "--llm-time-scale", "30", "--llm-curve-window-seconds", "4",
            "--llm-output-tokens", "32", "--llm-curve-scales", ",".join(f"{s:g}" for s in SCALES),
            "--llm-out", str(out), "--llm-run-id", "h", locustfile=EXAMPLE,
        )  # fmt: skip
        run(cmd, env=child_env(), timeout=120)
    return log, out / "h"


@pytest.fixture(scope="module")
def scales_replay(replays) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    log, run_dir = replays[("scales", 0, True)].result()
    assert isinstance(run_dir, Path)
    return log, run_dir


@pytest.mark.parametrize("metrics", [True, False], ids=["with-metrics", "without-metrics"])
def test_replay_at_scales_finds_the_headroom_the_sim_implies(
    scales_replay: tuple[Path, Path],
    tmp_path: Path,
    metrics: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    slots, peak, scales = SLOTS, PEAK, SCALES
    log, run_dir = scales_replay
    if not metrics:  # the same run without the server's counters
        run_dir = without_server_metrics(run_dir, tmp_path / "h")
    # the truth: the sim saturates at c* slots. The run allows at least the highest level a
    # window replayed at or below c* and never more than c* (which it may name exactly, from
    # the server's running maximum or the client's queue estimate when the stage just past c*
    # is the knee). The first scale whose plateau passes c* is the first that breaks.
    c_star = saturation_concurrency(preset("fast", max_num_seqs=slots), 64, 32)
    assert c_star == slots
    windows = json.loads((run_dir / "run.json").read_text())["curve"]["windows"]
    tested = max(w["target_users"] for w in windows if w["target_users"] <= c_star)
    first_break = min(s for s in scales if peak * s > c_star)
    capacity = run_capacity(load_analysis(run_dir))
    if capacity.kind == "cannot_tell":  # a late load generator: "cannot tell", with its lag
        assert capacity.users is None and late_cannot_tell(load_analysis(run_dir)), capacity
        return
    if capacity.kind == "tested":
        # right, or saying it cannot tell: no knee was found only because the windows could
        # not be judged (client-bound or too noisy on a busy machine), never over a judged one
        assert capacity.users is None or capacity.users <= c_star, capacity
        verdicts = load_analysis(run_dir).knee.stages
        past = [v for v in verdicts if v.target_users > c_star]
        assert past and all(not v.trusted or v.noisy for v in past), verdicts
        return
    code = trace_cli.main([str(log), "--against", str(run_dir), "--out", str(tmp_path),
                           "--no-plot"])  # fmt: skip
    assert code == 0
    doc = json.loads((tmp_path / "prod.jsonl.trace.json").read_text())
    room, replay = doc["headroom"], doc["curve_replay"]
    allowed = room["allowed"]
    assert room["peak"] == peak and tested <= allowed <= c_star, (tested, allowed, c_star)
    assert room["ratio"] == pytest.approx(allowed / peak)
    with (run_dir / "stages.csv").open() as f:
        ran = {int(r["target_users"]) for r in csv.DictReader(f)}
    assert {peak * s for s in scales[:2]} <= ran  # the plateaus of ×1 and ×2 ran
    assert replay["breaking_scale"] == first_break
    assert replay["held"] == [s for s in scales if s < first_break]
    assert replay["scales"] == list(scales)
    # the screen shows the headroom and the replay's break that trace.json holds: the log's
    # peak (its P95 too, on a plateau), allowed by the knee, and the first scale that breaks
    assert room["p95"] == peak and capacity.kind == "knee"
    text = capsys.readouterr().out
    assert room["text"] in text and replay["text"] in text


def test_the_web_uis_live_tab_draws_the_logs_curve_beside_the_measured_count(
    sim_server, tmp_path: Path
) -> None:
    import re
    import subprocess

    from tests.support.run_support import (
        free_port,
        http_get,
        http_post,
        wait_for_web_ui,
        wait_state,
    )

    sim = sim_server(preset="fast", max_num_seqs=64)
    log = _triangle_log(tmp_path / "prod.jsonl", span=900.0)
    out, port = tmp_path / "runs", free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = locust_cmd(
        "--web-host", "127.0.0.1", "--web-port", str(port), "--host", sim.url,
        "--stop-timeout", "10", "--llm-out", str(out), locustfile=EXAMPLE,
    )  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env()
    )
    try:
        assert "llm_replay_curve" in wait_for_web_ui(base)  # a field of the start form
        form = {"user_count": "1", "spawn_rate": "1", "host": sim.url,
                "llm_replay_curve": str(log), "llm_time_scale": "90",
                "llm_curve_window_seconds": "2"}  # fmt: skip
        assert http_post(base + "/swarm", form)["success"]
        wait_state(base, "running", 15.0)
        wait_state(base, "stopped", 60.0)
        fragment = http_get(base + "/loadknee/live/fragment").decode()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    chart = fragment[fragment.index('data-chart="curve"') :]
    chart = chart[: chart.index("</svg>")]
    # a legend entry per line, in the lines' colours: the log's (dashed) first, then measured
    legend = re.findall(r'<rect [^>]*height="3" fill="(#[0-9a-f]+)"/>', chart)
    assert legend == ["#9ca3af", "#3b82f6"], legend
    assert 'stroke="#9ca3af" stroke-width="2" stroke-dasharray' in chart
    # two lines drawn, each with many points: the log's (grey, dashed) and the measured one
    lines = re.findall(r'<path d="(M[^"]+)" fill="none" stroke="(#[0-9a-f]+)"', chart)
    points = {color: d.count("L") for d, color in lines}
    assert points.get("#9ca3af", 0) >= 8 and points.get("#3b82f6", 0) >= 8, points
