"""Start ``loadknee sim`` as a subprocess and talk to it (for tests, benchmarks and the demo).

``with SimProcess.start(preset="fast", max_num_seqs=4) as sim: ...`` runs
``python -m loadknee_locust sim --port 0 --preset fast --seed 0 --max-num-seqs 4``, waits for its
"listening" line (at most ``timeout_s``), and always stops the process on exit (SIGTERM, then
SIGKILL). Its stderr is kept in a file and quoted if it fails to start; ``pass_stderr=True``
sends it to ours instead (the demo: a user should see a simulator's error when it happens).
``sim.url``, ``sim.log()``, ``sim.stats()``, ``sim.metrics_text()`` and ``sim.crash()`` read the
server's truth over plain HTTP (stdlib only: usable from gevent-patched processes too).
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from types import TracebackType
from typing import IO, Any

from loadknee_locust.children import stop_child
from loadknee_locust.sim.cli import READY_PREFIX

START_TIMEOUT_S = 30.0


def cli_args(preset: str = "fast", *, seed: int = 0, **overrides: Any) -> list[str]:
    """``loadknee sim`` arguments for a preset plus SimParams overrides (and ``allow_control``)."""
    args = ["--port", "0", "--preset", preset, "--seed", str(seed)]
    for name, value in overrides.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            if name == "allow_control":
                args += [flag] if value else []
            else:
                args.append(flag if value else "--no-" + name.replace("_", "-"))
        else:
            args += [flag, str(value)]
    return args


class SimProcess:
    """A running ``loadknee sim`` subprocess; stop it with :meth:`stop` or a ``with`` block."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str, stderr: IO[bytes] | None) -> None:
        self.proc = proc
        self.url = url
        self._stderr = stderr

    @classmethod
    def start(
        cls,
        preset: str = "fast",
        *,
        timeout_s: float = START_TIMEOUT_S,
        pass_stderr: bool = False,
        **overrides: Any,
    ) -> SimProcess:
        # the file lives as long as the process
        stderr = None if pass_stderr else tempfile.TemporaryFile()  # noqa: SIM115
        command = [sys.executable, "-m", "loadknee_locust", "sim", *cli_args(preset, **overrides)]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr)
        try:
            line = _read_line(proc, timeout_s)
            if not line.startswith(READY_PREFIX):
                raise RuntimeError(f"unexpected first line {line!r}")
        except (RuntimeError, TimeoutError) as exc:
            _terminate(proc)
            message = f"loadknee sim did not start: {exc}; stderr: {_tail(stderr)}"
            _close(stderr)
            raise RuntimeError(message) from None
        except BaseException:
            _terminate(proc)
            _close(stderr)
            raise
        return cls(proc, line[len(READY_PREFIX) :].strip(), stderr)

    def get(self, path: str, timeout_s: float = 10.0) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=timeout_s) as response:
            return bytes(response.read())

    def get_status(self, path: str) -> int:
        """HTTP status of ``GET path`` (errors included, no exception)."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            return int(error.code)

    def log(self) -> list[dict[str, Any]]:
        """``GET /sim/log``: the per-request records (see :mod:`.simlog`)."""
        return list(json.loads(self.get("/sim/log")))

    def stats(self) -> dict[str, Any]:
        return dict(json.loads(self.get("/sim/stats")))

    def metrics_text(self) -> str:
        return self.get("/metrics").decode()

    def crash(self) -> None:
        """Trigger the OOM path (the server must run with ``allow_control=True``)."""
        request = urllib.request.Request(self.url + "/sim/crash", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def stop(self) -> None:
        _terminate(self.proc)
        _close(self._stderr)

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _read_line(proc: subprocess.Popen[bytes], timeout_s: float) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while b"\n" not in buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"loadknee sim printed no ready line within {timeout_s} s")
            if selector.select(left):
                chunk = proc.stdout.read1(4096)  # type: ignore[attr-defined]
                if not chunk:
                    raise RuntimeError(f"loadknee sim exited early (code {proc.poll()})")
                buffer += chunk
    return buffer.split(b"\n", 1)[0].decode()


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    stop_child(proc, 5.0)
    if proc.stdout is not None:
        proc.stdout.close()


def _close(stream: IO[bytes] | None) -> None:
    if stream is not None:
        stream.close()


def _tail(stream: IO[bytes] | None, limit: int = 2000) -> str:
    if stream is None:  # passed through: the reader has seen it already
        return "(passed through)"
    try:
        stream.seek(0)
        return stream.read().decode(errors="replace")[-limit:]
    except ValueError:  # already closed
        return ""
