"""Read memory and utilisation of every local GPU through NVML (pynvml), turning failures into rows.

The calls used, and why only these (each is one cheap driver query):

* ``nvmlInit`` / ``nvmlShutdown`` — open and close the library;
* ``nvmlDeviceGetCount`` and ``nvmlDeviceGetHandleByIndex`` — the GPUs, in NVML index order;
* ``nvmlDeviceGetMemoryInfo`` → ``used`` / ``total`` in bytes → MiB (what ``nvidia-smi``
  shows as ``memory.used`` / ``memory.total``);
* ``nvmlDeviceGetUtilizationRates`` → ``gpu`` (% of time a kernel ran: ``utilization.gpu``)
  and ``memory`` (% of time device memory was read or written: ``utilization.memory``, the
  same counter as DCGM's ``MEM_COPY_UTIL``) → ``gpu_util_pct`` / ``mem_bw_util_pct``.
  NVML has no plain SM-activity reading, so ``sm_util_pct`` stays empty for this source;
* ``nvmlDeviceGetPowerUsage`` → milliwatts → ``power_w`` (``power.draw`` in nvidia-smi); empty
  where the board does not report it (NotSupported).

Every method is blocking (ctypes into the driver) and never raises: the sampler runs them in
gevent's threadpool so the hub is not stalled. A failure becomes a row with empty values and the
reason in ``error`` — library missing, no GPU, a GPU lost mid-run — and the reader retries
(``nvmlShutdown`` + ``nvmlInit``) every ``retry_s`` seconds, so a GPU that comes back is
sampled again.

The one seam for tests is the module object: ``NvmlReader(nvml=fake)``; without it,
:func:`load_pynvml` does the real ``import pynvml`` on first use.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable
from typing import Any

MIB = 1024 * 1024


def load_pynvml() -> Any:
    """Import the real pynvml (deferred so that importing this module never touches the driver).

    The ``pynvml`` name is provided by NVIDIA's ``nvidia-ml-py``; the ``pynvml`` PyPI package
    (13.x) is a shim over it that warns it is deprecated on import: that warning is not ours to
    show the user on every run.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*pynvml.*deprecated")
        import pynvml

    return pynvml


class NvmlReader:
    """Samples all local GPUs; ``open``/``sample``/``close`` never raise."""

    def __init__(
        self,
        nvml: Any = None,
        *,
        retry_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._nvml = nvml
        self._retry_s = retry_s
        self._clock = clock
        self._handles: list[Any] = []
        self._open = False
        self._last_error: str | None = None
        self._next_attempt = 0.0

    @property
    def last_error(self) -> str | None:
        return self._last_error

    def open(self) -> int:
        """Initialise NVML and find the GPUs: how many (0 on any failure; see ``last_error``)."""
        self._next_attempt = self._clock() + self._retry_s
        try:
            if self._nvml is None:
                self._nvml = load_pynvml()
            nvml = self._nvml
            if self._open:
                self._shutdown()
            nvml.nvmlInit()
            self._open = True
            count = int(nvml.nvmlDeviceGetCount())
            self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as exc:
            self._handles = []
            self._last_error = describe(exc)
            return 0
        if not self._handles:
            self._last_error = "NVML found no GPU"
            return 0
        self._last_error = None
        return len(self._handles)

    def sample(self, timestamp_unix_s: float) -> list[dict[str, Any]]:
        """One row per GPU (source ``nvml``); an error row when NVML is unavailable."""
        if not self._handles or self._last_error is not None:
            if self._clock() >= self._next_attempt:
                self.open()
            if not self._handles:
                return [_error_row(timestamp_unix_s, None, self._last_error or "NVML unavailable")]
        rows = []
        for index, handle in enumerate(self._handles):
            try:
                rows.append(self._read(timestamp_unix_s, index, handle))
            except Exception as exc:
                # a lost GPU: report it, keep reading the others, reopen NVML after retry_s
                self._last_error = describe(exc)
                if self._clock() >= self._next_attempt:
                    self._next_attempt = self._clock() + self._retry_s
                rows.append(_error_row(timestamp_unix_s, index, describe(exc)))
        return rows

    def close(self) -> None:
        """Shut NVML down; safe to call twice or when it never opened."""
        if self._open:
            self._shutdown()
        self._handles = []

    def _read(self, timestamp_unix_s: float, index: int, handle: Any) -> dict[str, Any]:
        nvml = self._nvml
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        gpu_util: float | None
        mem_util: float | None
        try:
            util = nvml.nvmlDeviceGetUtilizationRates(handle)
            gpu_util, mem_util = float(util.gpu), float(util.memory)
        except Exception as exc:
            if "NotSupported" not in type(exc).__name__:
                raise
            gpu_util = mem_util = None  # e.g. a MIG slice: memory only
        power_w: float | None
        try:
            power_w = float(nvml.nvmlDeviceGetPowerUsage(handle)) / 1000.0
        except Exception as exc:
            if "NotSupported" not in type(exc).__name__ and not isinstance(exc, AttributeError):
                raise
            power_w = None  # no power sensor on this board (or an older binding without it)
        return {
            "timestamp_unix_s": timestamp_unix_s,
            "gpu_index": index,
            "source": "nvml",
            "memory_used_mib": memory.used / MIB,
            "memory_total_mib": memory.total / MIB,
            "gpu_util_pct": gpu_util,
            "mem_bw_util_pct": mem_util,
            "power_w": power_w,
        }

    def _shutdown(self) -> None:
        self._open = False
        # shutting down a lost driver may fail; there is nothing left to release then
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()


def describe(exc: BaseException) -> str:
    """A short one-line reason: the exception class (which names the NVML error) and its text."""
    text = " ".join(str(exc).split())[:160]
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


def _error_row(timestamp_unix_s: float, index: int | None, error: str) -> dict[str, Any]:
    return {
        "timestamp_unix_s": timestamp_unix_s,
        "gpu_index": index,
        "source": "nvml",
        "error": error,
    }
