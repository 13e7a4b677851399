"""The tests' own port helper: each test process's ports lie outside the kernel's ephemeral range
and apart from every other process's, so no port-0 bind elsewhere can take one meanwhile."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import ports


@pytest.mark.parametrize(
    ("name", "index"),
    [("gw0", 0), ("gw5", 5), ("gw15", 15), ("", 0), ("master", 0)],
)
def test_worker_index(name: str, index: int) -> None:
    assert ports.worker_index(name) == index


@pytest.mark.parametrize(
    ("low", "high"),
    [(32768, 60999), (49152, 65535), (1024, 65535), (15000, 40000)],
)
def test_slices_avoid_the_ephemeral_range_and_each_other(low: int, high: int) -> None:
    starts = [ports.slice_start(low, high, i) for i in range(ports.SLICES)]
    spans = [range(s, s + ports.SLICE) for s in starts]
    assert all(s.stop <= 65536 and s.start >= 1024 for s in spans)
    assert len({p for s in spans for p in s}) == ports.SLICE * ports.SLICES  # no overlap
    if low - ports.SLICE * ports.SLICES >= 10000 or high + ports.SLICE * ports.SLICES < 65536:
        assert all(s.stop <= low or s.start > high for s in spans)


def test_worker_slices_repeat_past_the_last() -> None:
    assert ports.slice_start(32768, 60999, ports.SLICES + 2) == ports.slice_start(32768, 60999, 2)


def test_ephemeral_range_reads_the_kernel_file_or_falls_back(tmp_path: Path) -> None:
    given = tmp_path / "range"
    given.write_text("40000\t50000\n")
    assert ports.ephemeral_range(given) == (40000, 50000)
    given.write_text("garbage")
    assert ports.ephemeral_range(given) == (32768, 60999)
    assert ports.ephemeral_range(tmp_path / "absent") == (32768, 60999)


def test_free_port_is_bindable_outside_the_ephemeral_range_and_not_handed_twice() -> None:
    low, high = ports.ephemeral_range()
    given = [ports.free_port() for _ in range(20)]
    assert len(set(given)) == 20
    assert all(ports.bindable(p) and not low <= p <= high for p in given)
