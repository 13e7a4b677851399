"""nvsmi: a capture in the single-machine source's format, read on the run's clock."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timezone
from pathlib import Path

import pytest

from analysis.inputs.nvsmi import read_nvidia_smi_csv, resolve_tz
from loadknee_core.contract import GPU_COLUMNS
from tests.support.paths import DATA

CAPTURE = DATA / "nvidia_smi_seed000.csv"
#: 2024/05/01 12:00:00 read as UTC+8 (the GPU host's zone in this fixture)
T0_SHANGHAI = datetime(2024, 5, 1, 4, 0, 0, tzinfo=UTC).timestamp()


def test_reads_seed_000_capture_in_the_gpu_hosts_zone() -> None:
    gpu = read_nvidia_smi_csv(CAPTURE, tz="Asia/Shanghai")
    assert list(gpu.columns) == list(GPU_COLUMNS)
    assert len(gpu) == 48 and gpu.attrs["skipped_lines"] == []
    assert gpu["timestamp_unix_s"].iloc[0] == T0_SHANGHAI
    assert gpu["timestamp_unix_s"].iloc[2] == T0_SHANGHAI + 0.5
    assert list(gpu["gpu_index"][:4]) == [0, 1, 0, 1]  # two GPUs, consecutive lines per sample
    first = gpu.iloc[0]
    assert (first["memory_used_mib"], first["memory_total_mib"], first["gpu_util_pct"]) == (
        62000,
        81559,
        20,
    )
    assert set(gpu["source"]) == {"nvidia-smi"}
    assert gpu["sm_util_pct"].isna().all() and gpu["error"].isna().all()  # missing, not 0


@pytest.mark.parametrize(
    ("tz", "hours_after_utc_reading"),
    [("UTC", 0), ("+08:00", -8), ("-0530", 5.5), ("Asia/Shanghai", -8), (UTC, 0)],
)
def test_tz_forms(tz: str | timezone, hours_after_utc_reading: float) -> None:
    stamp = read_nvidia_smi_csv(CAPTURE, tz=tz)["timestamp_unix_s"].iloc[0]
    utc = datetime(2024, 5, 1, 12, tzinfo=UTC).timestamp()
    assert stamp == utc + hours_after_utc_reading * 3600


def test_default_tz_is_this_machines_zone() -> None:
    stamp = read_nvidia_smi_csv(CAPTURE)["timestamp_unix_s"].iloc[0]
    assert stamp == datetime(2024, 5, 1, 12).timestamp()  # naive → local, as documented


def test_bad_tz_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown time zone"):
        resolve_tz("Mars/Olympus")


def test_header_units_index_and_na(tmp_path: Path) -> None:
    path = tmp_path / "smi.csv"
    path.write_text(
        "timestamp, index, memory.used [MiB], memory.total [MiB], utilization.gpu [%], "
        "utilization.memory [%]\n"
        "2024/05/01 12:00:00.500, 1, 10240 MiB, 81920 MiB, 35 %, 12 %\n"
        "2024/05/01 12:00:00.500, 0, 20480 MiB, 81920 MiB, [N/A], [Not Supported]\n"
        "2024/05/01 12:00:01.000, 1, 10250 MiB, 8192"  # cut by the kill
    )
    gpu = read_nvidia_smi_csv(path, tz="UTC")
    assert list(gpu["gpu_index"]) == [1, 0]  # the index field wins over line order
    assert list(gpu["memory_used_mib"]) == [10240, 20480]
    assert gpu["mem_bw_util_pct"].iloc[0] == 12 and math.isnan(gpu["gpu_util_pct"].iloc[1])
    assert gpu.attrs["skipped_lines"] == [4]


def test_custom_query_without_header(tmp_path: Path) -> None:
    path = tmp_path / "smi.csv"
    path.write_text("0, 2024/05/01 12:00:00.000, 100, 200\n1, 2024/05/01 12:00:00.000, 300, 400\n")
    gpu = read_nvidia_smi_csv(path, tz="UTC", query="index,timestamp,memory.used,memory.total")
    assert list(gpu["gpu_index"]) == [0, 1] and list(gpu["memory_total_mib"]) == [200, 400]


@pytest.mark.parametrize(
    ("text", "match"),
    [("garbage\nmore garbage\n", "no line could be read")],
)
def test_unreadable_file(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "smi.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        read_nvidia_smi_csv(path, tz="UTC")
    with pytest.raises(ValueError, match="timestamp"):
        read_nvidia_smi_csv(CAPTURE, query="memory.used,memory.total")
