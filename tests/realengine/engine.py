"""Build (once, cached outside the repo) and start llama.cpp's llama-server for the real-engine tests.

The build compiles llama-server from the llama.cpp sources vendored in the llama-cpp-python sdist
on PyPI (``setup.sh`` beside this file; ~6-10 minutes on 2 cores, once per machine) and makes two
random-weight models locally (no hub download). The cache lives in ``$LOADKNEE_CACHE`` (default
``~/.cache/loadknee``), keyed by the llama-cpp-python version, so CI on a fresh machine pays the
compile once and later runs reuse it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

LCP_VERSION = "0.3.36"
HERE = Path(__file__).resolve().parent


def cache_dir() -> Path:
    root = Path(os.environ.get("LOADKNEE_CACHE", Path.home() / ".cache" / "loadknee"))
    return root / f"realengine-lcp{LCP_VERSION}"


def missing_tools() -> list[str]:
    """The build needs a C++ compiler and cmake; a machine without them skips these tests."""
    return [tool for tool in ("cmake", "c++", "make") if shutil.which(tool) is None]


def ensure_built(timeout_s: float = 1800) -> Path:
    """Return the cache dir with llama-server and both models, building what is missing."""
    re_dir = cache_dir()
    binary = re_dir / "build-server" / "bin" / "llama-server"
    small = re_dir / "model-small" / "tiny-llama.gguf"
    if binary.exists() and small.exists():
        return re_dir
    re_dir.mkdir(parents=True, exist_ok=True)
    log = re_dir / "setup.log"
    with log.open("ab") as out:
        subprocess.run(
            ["bash", str(HERE / "setup.sh")],
            env={**os.environ, "RE_DIR": str(re_dir), "LCP_VERSION": LCP_VERSION},
            stdout=out,
            stderr=subprocess.STDOUT,
            check=True,
            timeout=timeout_s,
        )
    return re_dir


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LlamaServer:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_llama_server(
    re_dir: Path, *, model: str = "model-small", parallel: int = 8, threads: int = 2
) -> LlamaServer:
    """Start llama-server on a free loopback port (``--parallel`` slots, ``--metrics``)."""
    port = free_port()
    log_path = re_dir / f"server-{port}.log"
    cmd = [
        str(re_dir / "build-server" / "bin" / "llama-server"),
        "-m", str(re_dir / model / "tiny-llama.gguf"),
        "--alias", "tiny",
        "--host", "127.0.0.1", "--port", str(port),
        "--parallel", str(parallel), "--ctx-size", str(512 * parallel), "--batch-size", "512",
        "--threads", str(threads), "--threads-batch", str(threads),
        "--poll", "0", "--metrics", "--no-webui",
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
