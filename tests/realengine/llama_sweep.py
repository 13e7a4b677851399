"""The suite's one llama-server sweep, recorded alone before the test processes start.

Why alone: the engine computes on one thread of this machine, so its throughput is the CPU it
gets: beside three other test processes' sweeps (load 2.7-5.0 on 2 cores, a fresh run) its step
time doubled from 4 to 8 users -- a right reading of a starved engine, not the slot queue
tests/realengine/test_realengine_llamacpp.py checks. Why before the test processes start: as a
``quiet`` test it ran alone in the middle of the run, the other five processes idle while it
waited for their tests to end and while it ran (108 s in ci40), and its module's analyses then
ran alone too. tests/conftest.py records it in the controller right after the engine build,
before pytest-xdist hands out work; the module's fixture reads what was recorded (and records
it itself only where the controller did not: a run that selected no real-engine path).

:func:`record` starts the 4-slot server, measures its decode step (:func:`~.engine.
decode_step_ms`), runs one default ``loadknee run`` over :data:`LEVELS` and counts the
generations the server's own log says it finished; :func:`save` / :func:`load` carry the
result to the test processes as one JSON file named by :data:`ENV`.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.realengine.engine import decode_step_ms, ensure_built, start_llama_server

#: where the controller's recording is: the path of its JSON file (inherited by the workers)
ENV = "PYTEST_LOADKNEE_LLAMA_SWEEP"
LEVELS = "1,2,4,8"
SLOTS = 4  # the server: --parallel 4
#: 32-token prompts and answers: every stage of the sweep is held to a count of requests, so the
#: work per request sets the sweep's length (64-token answers and prompts and a 32-user level
#: took 361 s alone; this sweep, on the server's one thread, 184 s and 177 CPU-s on an older
#: machine, ~100 s on an AMD EPYC); the slots, the queue past them and the counters show the same
OUTPUT_TOKENS = 32
INPUT_TOKENS = 32
RELEASE_LINE = re.compile(r"slot\s+release:")
# A guard against a hung run, not a speed target (about 2 min alone; a busy box is much slower)
SWEEP_GUARD_S = 2400


@dataclass(frozen=True)
class Recorded:
    """The sweep's run directory and what was read off the server around it."""

    url: str
    run_dir: str
    step_ms: dict[int, float]  # the engine's decode step with 1, 2 and SLOTS sequences at once
    served: int  # generation tasks the server finished during the sweep (its own log)
    returncode: int  # `loadknee run`'s exit status, and what it printed
    stdout: str
    stderr: str
    seconds: float  # how long the recording took, server start to stop

    def completed(self) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess([], self.returncode, self.stdout, self.stderr)


def _served_tasks(log_path: Path) -> int:
    """Generation tasks the server finished, from its own log (one 'slot release' per task)."""
    text = log_path.read_text(errors="replace")
    return sum(1 for line in text.splitlines() if RELEASE_LINE.search(line))


def _processing(url: str) -> float | None:
    """The server's own count of requests in progress (``llamacpp:requests_processing``)."""
    import urllib.request

    try:
        with urllib.request.urlopen(url + "/metrics", timeout=2) as resp:
            text = resp.read().decode(errors="replace")
    except OSError:
        return None
    from loadknee_core.promtext import parse_lines

    name = "llamacpp:requests_processing"
    found = [x.value for x in parse_lines(io.StringIO(text)).samples if x.metric == name]
    return found[0] if found else None


def _settled_count(url: str, log_path: Path, timeout_s: float = 15.0) -> int:
    """The finished generations in the server's log once the decode-step probes are all done:
    nothing in progress and the count unchanged over a poll. Why: the last probe's "slot
    release" line can reach the log after its client has read the last token; read too early,
    it was counted as a generation of the sweep (fresh #22, a CPU hog beside: 170 for 169)."""
    import time

    deadline = time.monotonic() + timeout_s
    last = -1
    while True:
        count = _served_tasks(log_path)
        if (count == last and _processing(url) == 0) or time.monotonic() > deadline:
            return count
        last = count
        time.sleep(0.3)


def record(dest: Path) -> Recorded:
    """One default sweep (refinement on) over 1..8 users against the 4-slot server, into
    ``dest/runs/llama``; ``loadknee run`` analyses it at its end, as a user's run does."""
    import time

    started = time.monotonic()
    server = start_llama_server(ensure_built(), model="model-small", parallel=SLOTS)
    try:
        step_ms = decode_step_ms(server.url, (1, 2, SLOTS), tokens=OUTPUT_TOKENS)
        before = _settled_count(server.url, server.log_path)
        cmd = [
            sys.executable, "-m", "loadknee_locust", "run", "--host", server.url,
            "--model", "tiny", "--levels", LEVELS, "--stage-requests", "32",
            "--warmup-seconds", "0", "--cooldown-seconds", "1",
            "--baseline-requests", "10", "--stop-after-knee", "-1",
            "--input-tokens", str(INPUT_TOKENS), "--output-tokens", str(OUTPUT_TOKENS),
            "--out", str(dest / "runs"), "--run-id", "llama",
        ]  # fmt: skip
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=SWEEP_GUARD_S)
            code, out, err = run.returncode, run.stdout, run.stderr
        except subprocess.TimeoutExpired as exc:  # say where it hung, not just "timeout"
            code, err = -1, f"loadknee run did not finish in {SWEEP_GUARD_S} s"
            out = exc.stdout if isinstance(exc.stdout, str) else ""
        served = _served_tasks(server.log_path) - before
    finally:
        server.stop()
    run_dir = dest / "runs" / "llama"
    return Recorded(server.url, str(run_dir), step_ms, served, code, out, err,
                    time.monotonic() - started)  # fmt: skip


def save(recorded: Recorded, path: Path) -> None:
    path.write_text(json.dumps(asdict(recorded)), encoding="utf-8")


def load() -> Recorded | None:
    """The controller's recording (None: it recorded none in this run)."""
    path = os.environ.get(ENV)
    if not path or not Path(path).exists():
        return None
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    doc["step_ms"] = {int(k): float(v) for k, v in doc["step_ms"].items()}
    return Recorded(**doc)
