"""A stand-in for the ``pynvml`` module: just the calls NvmlReader makes, with switches to fail."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace

MIB = 1024 * 1024


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_GpuIsLost(NVMLError):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


@dataclass
class FakeNvml:
    """``used_mib[i]``/``total_mib[i]``/``util[i]`` per GPU; flip the flags to simulate failures."""

    used_mib: list[float] = field(default_factory=lambda: [1000.0, 2000.0])
    total_mib: list[float] = field(default_factory=lambda: [81920.0, 81920.0])
    util: list[tuple[int, int]] = field(default_factory=lambda: [(35, 12), (70, 40)])
    library_missing: bool = False
    lost: set[int] = field(default_factory=set)
    util_unsupported: bool = False
    power_mw: list[int] = field(default_factory=lambda: [71_500, 252_000])
    power_unsupported: bool = False
    init_delay_s: float = 0.0  # a cold driver (no persistence mode) takes seconds to open
    init_calls: int = 0
    shutdown_calls: int = 0

    NVMLError = NVMLError

    def nvmlInit(self) -> None:
        self.init_calls += 1
        time.sleep(self.init_delay_s)  # called in a threadpool thread, as pynvml's would be
        if self.library_missing:
            raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:
        self.shutdown_calls += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.used_mib)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if i in self.lost:
            raise NVMLError_GpuIsLost("GPU is lost")
        return i

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        if h in self.lost:
            raise NVMLError_GpuIsLost("GPU is lost")
        return SimpleNamespace(used=int(self.used_mib[h] * MIB), total=int(self.total_mib[h] * MIB))

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        if self.util_unsupported:
            raise NVMLError_NotSupported("Not Supported")
        gpu, memory = self.util[h]
        return SimpleNamespace(gpu=gpu, memory=memory)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        if self.power_unsupported:
            raise NVMLError_NotSupported("Not Supported")
        return self.power_mw[h]
