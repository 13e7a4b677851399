"""Helpers for the real-Locust run tests: start Locust in a subprocess, read and check a run dir.

The checks recompute each row's stage and phase from ``stages.csv`` on their own (not with the
schedule code under test) and compare ``requests.csv`` with the simulator's own log.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from loadknee_core.contract import GPU_CSV, REQUEST_COLUMNS, SERVER_METRICS_CSV, STAGE_COLUMNS
from loadknee_locust.children import stop_child
from tests.support.ports import free_port

HERE = Path(__file__).parent
PROBE = str(HERE / "run_probe_locustfile.py")

T = TypeVar("T")


@contextmanager
def submitted(
    sweep: Callable[..., T], cases: Iterable[tuple[Any, ...]], out: Path, at_once: int = 3
) -> Iterator[dict[tuple[Any, ...], Future[T]]]:
    """Every case's ``sweep(*case, out)`` submitted to ``at_once`` threads (2 cores: the
    simulators keep time), handed out as futures keyed by case while the later sweeps still run;
    when the block ends the pool waits for the running ones and cancels the queued ones."""
    pool = ThreadPoolExecutor(max_workers=at_once)
    try:
        yield {case: pool.submit(sweep, *case, out) for case in cases}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def sweep_args(
    out: Path, *, levels: str = "1,2", stage_s: float = 2.0, baseline: int | None = 3
) -> list[str]:
    """Short-sweep options (``baseline=None``: leave --llm-baseline-requests to the caller)."""
    args = [
        "--llm-levels", levels,
        "--llm-stage-seconds", str(stage_s),
        "--llm-warmup-seconds", "0.5",
        "--llm-cooldown-seconds", "0.5",
        "--llm-out", str(out),
    ]  # fmt: skip
    return args if baseline is None else [*args, "--llm-baseline-requests", str(baseline)]


def locust_cmd(*args: str, locustfile: str = PROBE) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", locustfile, *args]


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCUST_", "LOADKNEE_"))}
    env.update(extra)
    return env


@contextmanager
def reaped(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """``proc`` for the block; a child still running when the block ends (a failed check, a
    timeout) is killed and its pipes drained, so no test leaves a process behind."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def run(cmd: list[str], *, timeout: float = 90.0, env: dict[str, str] | None = None) -> str:
    """Run to completion; return the combined output; fail with it on a non-zero exit."""
    child = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env or child_env()
    )
    with reaped(child) as proc:
        out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{out[-4000:]}"
    return out


def loadknee(*args: str, timeout_s: float = 300.0) -> subprocess.CompletedProcess[str]:
    """``python -m loadknee_locust ARGS`` to completion, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "loadknee_locust", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def http_get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return bytes(resp.read())


def http_post(url: str, form: dict[str, str] | None = None) -> Any:
    data = urllib.parse.urlencode(form or {}).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=10) as resp:
        return json.loads(resp.read() or b"{}")


def wait_state(base: str, want: str, timeout: float) -> list[dict[str, Any]]:
    """Poll /stats/requests until the runner state is ``want``; return the Knee rows seen last."""
    deadline = time.monotonic() + timeout
    knee: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        stats = json.loads(http_get(base + "/stats/requests"))
        for ext in stats.get("extended_stats") or []:
            if ext["key"] == "knee" and ext["data"]:
                knee = ext["data"]
        if stats["state"] == want:
            return knee
        time.sleep(0.5)
    raise AssertionError(f"state {want!r} not reached in {timeout} s")


def requests_counted(base: str) -> int:
    """Requests the (master's) Locust stats have counted so far, failures included."""
    stats = json.loads(http_get(base + "/stats/requests"))
    return sum(int(row["num_requests"]) for row in stats["stats"] if row["name"] != "Aggregated")


def wait_requests_counted(base: str, at_least: int, timeout: float) -> int:
    """Poll until Locust's stats count ``at_least`` requests (with workers: until their reports,
    which carry the rows too, reached the master); the count, or AssertionError at the deadline."""
    deadline = time.monotonic() + timeout
    while (counted := requests_counted(base)) < at_least:
        assert time.monotonic() < deadline, (
            f"Locust counted {counted} requests, not {at_least}, within {timeout} s"
        )
        time.sleep(0.2)
    return counted


def wait_for_web_ui(base: str, timeout: float = 30.0) -> str:
    """Poll the web UI's page until it answers; return its HTML."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return http_get(base + "/").decode()
        except OSError:
            assert time.monotonic() < deadline, "web UI did not come up"
            time.sleep(0.3)


def worker_args(processes: int) -> list[str]:
    """Options for a master with ``processes`` local workers, bound to a free loopback port."""
    port = str(free_port())
    return [
        "--processes", str(processes),
        "--master-bind-host", "127.0.0.1", "--master-bind-port", port, "--master-port", port,
    ]  # fmt: skip


@contextmanager
def web_ui(*args: str, locustfile: str = PROBE) -> Iterator[tuple[str, str]]:
    """Locust with ``args`` serving its web UI on a free loopback port: (its base URL, the start
    page's HTML) once the page answers. When the block ends Locust is stopped (SIGTERM, SIGKILL
    after 30 s), so a failed check leaves no process behind."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = locust_cmd(
        "--web-host", "127.0.0.1", "--web-port", str(port), *args, locustfile=locustfile
    )
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env()
    )
    try:
        yield base, wait_for_web_ui(base)
    finally:
        stop_child(proc, 30.0)


def wait_workers(base: str, workers: int, timeout: float) -> None:
    """Poll /stats/requests until ``workers`` workers are connected (ready or busy)."""
    deadline = time.monotonic() + timeout
    while json.loads(http_get(base + "/stats/requests")).get("worker_count", 0) < workers:
        assert time.monotonic() < deadline, f"{workers} workers did not connect in {timeout} s"
        time.sleep(0.3)


@dataclass
class RunDir:
    path: Path
    info: dict[str, Any]
    stages: list[dict[str, str]]
    requests: list[dict[str, str]]


def without_server_metrics(run_dir: Path, dest: Path) -> Path:
    """A copy of ``run_dir`` at ``dest`` as a run against a server without ``/metrics`` leaves it:
    each scrape of ``server_metrics.csv`` one row that carries only its error (``HTTP 404``, as
    the recorder writes for a simulator started with ``--no-metrics``), ``gpu.csv`` down to its
    header (a simulator's GPU rows come from the DCGM gauges of the same scrape), no ``report/``.
    A sweep whose plan does not depend on what it measures (fixed levels, no refinement, no
    early stop, a fixed replay) sends the same requests either way, so the "without /metrics"
    case needs no sweep of its own."""
    shutil.copytree(
        run_dir, dest, ignore=shutil.ignore_patterns("report", SERVER_METRICS_CSV, GPU_CSV)
    )
    with (run_dir / GPU_CSV).open(encoding="utf-8") as f:
        (dest / GPU_CSV).write_text(f.readline(), encoding="utf-8")
    with (run_dir / SERVER_METRICS_CSV).open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        columns, scrapes = list(reader.fieldnames or ()), {}
        for row in reader:
            scrapes.setdefault(row["timestamp_unix_s"], row["endpoint"])
    with (dest / SERVER_METRICS_CSV).open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, columns, restval="")
        writer.writeheader()
        for stamp, endpoint in scrapes.items():
            writer.writerow({"timestamp_unix_s": stamp, "endpoint": endpoint, "error": "HTTP 404"})
    return dest


def only_run_dir(out: Path) -> Path:
    dirs = [p for p in out.iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def read_csv(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == columns
        return list(reader)


def read_run_dir(path: Path) -> RunDir:
    info = json.loads((path / "run.json").read_text())
    stages = read_csv(path / "stages.csv", STAGE_COLUMNS)
    requests = read_csv(path / "requests.csv", REQUEST_COLUMNS)
    return RunDir(path, info, stages, requests)


def expected_label(stages: list[dict[str, str]], start: float) -> tuple[int, str]:
    """Stage and phase of a request by its start time, from stages.csv alone."""
    chosen = stages[0]
    for st in stages:
        if start >= float(st["start_unix_s"]):
            chosen = st
    if start < float(chosen["warmup_end_unix_s"]):
        return int(chosen["stage"]), "warmup"
    if start < float(chosen["measure_end_unix_s"]):
        return int(chosen["stage"]), "baseline" if chosen["kind"] == "baseline" else "measure"
    return int(chosen["stage"]), "cooldown"


def check_run(
    rd: RunDir, *, levels: list[int], baseline: int, stop_reason: str = "duration"
) -> None:
    """Stages as planned, boundaries ordered, every row labelled by the boundaries, ids unique."""
    kinds = (["baseline"] if baseline else []) + ["step"] * len(levels)
    users = ([1] if baseline else []) + levels
    assert [s["kind"] for s in rd.stages] == kinds
    assert [int(s["target_users"]) for s in rd.stages] == users
    assert [int(s["stage"]) for s in rd.stages] == list(range(len(kinds)))
    assert rd.stages[-1]["stop_reason"] == stop_reason
    prev_end = 0.0
    for st in rd.stages:
        times = [float(st[k]) for k in STAGE_COLUMNS[4:8]]
        assert times == sorted(times) and times[0] >= prev_end, st
        prev_end = times[-1]
    ids = [r["request_id"] for r in rd.requests]
    assert len(ids) == len(set(ids)), "duplicate request ids"
    for row in rd.requests:
        stage, phase = expected_label(rd.stages, float(row["start_unix_s"]))
        assert (int(row["stage"]), row["phase"]) == (stage, phase), row
        assert float(row["end_unix_s"]) >= float(row["start_unix_s"])
    counts = Counter((int(r["stage"]), r["phase"]) for r in rd.requests)
    if baseline:
        assert counts[(0, "baseline")] == baseline
        assert counts[(0, "warmup")] == 1
    for st in rd.stages:
        if st["kind"] == "step":
            assert counts[(int(st["stage"]), "measure")] > 0, (st, counts)


def assert_cancelled_only_where_stopped(rows: list[dict[str, Any]]) -> None:
    """A ``cancelled`` row only where the stop cut it: the last request of its user (a user is
    stopped once, at a stage's end or the run's; every request before its last one finished)."""
    by_user: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_user[(str(row["worker"]), str(row["user_id"]))].append(row)
    misplaced = [
        str(row["request_id"])
        for user_rows in by_user.values()
        for row in sorted(user_rows, key=lambda r: float(r["start_unix_s"]))[:-1]
        if row["outcome"] == "cancelled"
    ]
    assert not misplaced, f"{len(misplaced)} cancelled before their user's last: {misplaced[:5]}"


def assert_each_served_once(rows: list[dict[str, Any]], served_ids: list[str]) -> None:
    """Every request the server saw is exactly one row, and every row is a request it saw; a
    ``cancelled`` row (a user stopped mid-request, maybe before its bytes went out) may be
    either, and says so, but only as its user's last request."""
    assert_cancelled_only_where_stopped(rows)
    served = Counter(served_ids)
    assert all(n == 1 for n in served.values()), "a request reached the server twice"
    recorded = Counter(str(r["request_id"]) for r in rows)
    assert all(n == 1 for n in recorded.values()), "a request has two rows"
    missing = set(served) - set(recorded)
    extra = {str(r["request_id"]) for r in rows if r["outcome"] != "cancelled"} - set(served)
    assert not missing and not extra, (sorted(missing)[:5], sorted(extra)[:5])


def assert_matches_sim(rd: RunDir, sim_log: list[dict[str, Any]]) -> None:
    """Every request the simulator served appears exactly once in requests.csv, and vice versa."""
    assert_each_served_once(rd.requests, [str(rec["request_id"]) for rec in sim_log])
    cancelled = {r["request_id"] for r in rd.requests if r["outcome"] == "cancelled"}
    aborted = [rec for rec in sim_log if rec.get("outcome") in ("aborted", "cut")
               and str(rec["request_id"]) not in cancelled]  # fmt: skip
    assert not aborted, f"{len(aborted)} requests cut by the client (lost in flight)"
