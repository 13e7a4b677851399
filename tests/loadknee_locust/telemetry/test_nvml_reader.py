"""NvmlReader through a fake pynvml module: values, missing library, a GPU lost and recovered."""

from __future__ import annotations

import pytest

from loadknee_locust.telemetry.nvml import NvmlReader, load_pynvml
from tests.support.fake_nvml import FakeNvml


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_reads_every_gpu_in_mib_and_pct() -> None:
    reader = NvmlReader(FakeNvml(), clock=Clock())
    assert reader.open() == 2
    rows = reader.sample(100.0)
    assert [(r["gpu_index"], r["memory_used_mib"], r["memory_total_mib"]) for r in rows] == [
        (0, 1000.0, 81920.0),
        (1, 2000.0, 81920.0),
    ]
    assert [(r["gpu_util_pct"], r["mem_bw_util_pct"]) for r in rows] == [(35.0, 12.0), (70.0, 40.0)]
    assert all(r["source"] == "nvml" and r["timestamp_unix_s"] == 100.0 for r in rows)
    assert all("error" not in r for r in rows)


def test_sample_opens_lazily() -> None:
    reader = NvmlReader(FakeNvml(), clock=Clock())
    assert len(reader.sample(1.0)) == 2


def test_utilisation_not_supported_leaves_it_empty_not_zero() -> None:
    reader = NvmlReader(FakeNvml(util_unsupported=True), clock=Clock())
    row = reader.sample(1.0)[0]
    assert row["gpu_util_pct"] is None and row["mem_bw_util_pct"] is None
    assert row["memory_used_mib"] == 1000.0


@pytest.mark.parametrize(
    ("fake", "reason"),
    [
        (FakeNvml(library_missing=True), "NVMLError_LibraryNotFound"),
        (FakeNvml(used_mib=[], total_mib=[], util=[]), "NVML found no GPU"),
    ],
)
def test_unavailable_nvml_gives_one_error_row_per_sample(fake: FakeNvml, reason: str) -> None:
    clock = Clock()
    reader = NvmlReader(fake, clock=clock, retry_s=10)
    assert reader.open() == 0
    rows = reader.sample(5.0)
    assert len(rows) == 1 and rows[0]["gpu_index"] is None
    assert rows[0]["error"].startswith(reason)
    assert "memory_used_mib" not in rows[0]  # empty, never 0


def test_retries_init_only_every_retry_s() -> None:
    clock, fake = Clock(), FakeNvml(library_missing=True)
    reader = NvmlReader(fake, clock=clock, retry_s=10)
    reader.sample(0.0)
    clock.t = 5
    reader.sample(5.0)
    assert fake.init_calls == 1
    clock.t = 10
    fake.library_missing = False
    rows = reader.sample(10.0)
    assert fake.init_calls == 2
    assert [r.get("error") for r in rows] == [None, None]


def test_gpu_lost_mid_run_then_back() -> None:
    clock, fake = Clock(), FakeNvml()
    reader = NvmlReader(fake, clock=clock, retry_s=10)
    reader.open()
    fake.lost = {1}
    rows = reader.sample(1.0)
    assert rows[0].get("error") is None and rows[0]["memory_used_mib"] == 1000.0
    assert rows[1]["gpu_index"] == 1 and rows[1]["error"].startswith("NVMLError_GpuIsLost")
    clock.t = 3  # before retry_s: the healthy GPU keeps being read, no re-init
    assert reader.sample(3.0)[0]["memory_used_mib"] == 1000.0
    assert fake.init_calls == 1
    fake.lost = set()
    clock.t = 11  # after retry_s: shutdown + init, both GPUs back
    rows = reader.sample(11.0)
    assert fake.init_calls == 2 and fake.shutdown_calls == 1
    assert [r.get("error") for r in rows] == [None, None]


def test_close_is_idempotent() -> None:
    fake = FakeNvml()
    reader = NvmlReader(fake, clock=Clock())
    reader.close()
    reader.open()
    reader.close()
    reader.close()
    assert fake.shutdown_calls == 1


def test_the_real_import_is_in_place() -> None:
    """The seam is the module object; the real one is pynvml (its NVMLError included)."""
    module = load_pynvml()
    assert module.__name__ == "pynvml" and hasattr(module, "NVMLError")
    assert callable(module.nvmlDeviceGetUtilizationRates)
