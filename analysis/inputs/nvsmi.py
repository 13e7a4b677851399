"""Import an ``nvidia-smi`` CSV capture from the GPU host as ``gpu.csv`` rows on the run's clock.

The GPU-sampling method samples the GPU beside the load test with::

    nvidia-smi --query-gpu=timestamp,memory.used,memory.total,utilization.gpu \\
        --format=csv,noheader,nounits -lms 500 > gpu.csv

which writes lines like ``2024/05/01 12:00:00.500, 10240, 81920, 35``. Two things make such a
file hard to line up with ``requests.csv``:

* **The timestamp is the GPU host's local wall time, without a zone.** :func:`read_nvidia_smi_csv`
  reads it in ``tz`` — default: the zone of the machine running the analysis (right when the
  capture was taken on the same machine or one in the same zone). Pass the GPU host's zone
  otherwise: an IANA name (``"Asia/Shanghai"``), ``"UTC"``, an offset (``"+08:00"``, ``"-0530"``)
  or a ``tzinfo``.
* **Several GPUs print consecutive lines with the same timestamp.** ``gpu_index`` is the line's
  position within its timestamp, or the ``index`` field when the query asked for it.

Also accepted: a header line (``--format=csv`` without ``noheader``; the fields are then read
from it), units in values (without ``nounits``), ``[N/A]`` / ``[Not Supported]`` (→ NaN), the
fields ``index``, ``utilization.memory`` (→ ``mem_bw_util_pct``) and ``power.draw`` (W →
``power_w``), and a custom field order through ``query=`` (the ``--query-gpu`` list). Lines
that cannot be read (a cut last line) are skipped, counted in ``frame.attrs["skipped_lines"]``
and logged once.
"""

from __future__ import annotations

import csv
import logging
import math
import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any, Final
from zoneinfo import ZoneInfo

import pandas as pd

from loadknee_core.contract import GPU_COLUMNS

logger = logging.getLogger(__name__)

#: the ``--query-gpu`` list of the GPU sampling method
SEED_QUERY: Final = "timestamp,memory.used,memory.total,utilization.gpu"
#: nvidia-smi field → gpu.csv column
FIELD_COLUMNS: Final[dict[str, str]] = {
    "index": "gpu_index",
    "memory.used": "memory_used_mib",
    "memory.total": "memory_total_mib",
    "utilization.gpu": "gpu_util_pct",
    "utilization.memory": "mem_bw_util_pct",
    "power.draw": "power_w",
}
_TIME_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S")
_MISSING = {"", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]"}


def read_nvidia_smi_csv(
    path: str | Path, *, tz: str | tzinfo | None = None, query: str = SEED_QUERY
) -> pd.DataFrame:
    """Read the capture as a frame with :data:`~loadknee_core.contract.GPU_COLUMNS`.

    ``tz``: the GPU host's zone (see the module docstring; default: this machine's zone).
    ``query``: the ``--query-gpu`` fields, used when the file has no header line.
    Raises ``OSError`` for an unreadable file and ``ValueError`` for a bad ``tz`` or ``query``
    or a file in which no line could be read.
    """
    zone = resolve_tz(tz)
    fields = _fields(query)
    rows: list[dict[str, Any]] = []
    skipped: list[int] = []
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        for number, cells in enumerate(csv.reader(f, skipinitialspace=True), 1):
            if not cells or all(not c.strip() for c in cells):
                continue
            if not rows and not skipped and _is_header(cells):
                fields = _fields(",".join(cells))
                continue
            row = _row(cells, fields, zone)
            if row is None:
                skipped.append(number)
            else:
                rows.append(row)
    if skipped:
        logger.warning(
            "%s: skipped %d unreadable line(s) (first: line %d)", path, len(skipped), skipped[0]
        )
    if not rows and skipped:
        raise ValueError(f"{path}: no line could be read as nvidia-smi --query-gpu CSV")
    frame = pd.DataFrame(rows, columns=["_stamp", *GPU_COLUMNS])
    if "index" not in fields:
        frame["gpu_index"] = frame.groupby("_stamp", sort=False).cumcount()
    frame = frame.drop(columns="_stamp")
    frame["source"] = "nvidia-smi"
    for column in GPU_COLUMNS:
        if column not in ("source", "error"):
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame["gpu_index"] = frame["gpu_index"].astype("Int64")
    frame.attrs["skipped_lines"] = skipped
    return frame


def resolve_tz(tz: str | tzinfo | None) -> tzinfo | None:
    """``None`` (this machine's zone), a ``tzinfo``, or one parsed from a name or offset."""
    if tz is None or isinstance(tz, tzinfo):
        return tz
    text = tz.strip()
    match = re.fullmatch(r"(?:UTC|GMT)?([+-])(\d{1,2}):?(\d{2})?", text)
    if match:
        sign = -1 if match.group(1) == "-" else 1
        offset = timedelta(hours=int(match.group(2)), minutes=int(match.group(3) or 0))
        return timezone(sign * offset)
    if text.upper() in ("UTC", "Z", "GMT"):
        return UTC
    try:
        return ZoneInfo(text)
    except Exception as exc:  # ZoneInfoNotFoundError, ValueError for odd keys
        raise ValueError(
            f"unknown time zone {tz!r} (use e.g. 'UTC', '+08:00', 'Asia/Shanghai')"
        ) from exc


def _fields(query: str) -> list[str]:
    fields = [re.sub(r"\s*\[.*\]\s*$", "", f).strip().lower() for f in query.split(",")]
    if "timestamp" not in fields:
        raise ValueError(f"the query must include 'timestamp' to be aligned: {query!r}")
    return fields


def _is_header(cells: list[str]) -> bool:
    return cells[0].strip().lower().startswith("timestamp") or any(
        "." in c and "[" in c for c in cells
    )


def _row(cells: list[str], fields: list[str], zone: tzinfo | None) -> dict[str, Any] | None:
    if len(cells) != len(fields):
        return None
    values = dict(zip(fields, (c.strip() for c in cells), strict=True))
    stamp = _unix_seconds(values["timestamp"], zone)
    if stamp is None:
        return None
    row: dict[str, Any] = {"_stamp": values["timestamp"], "timestamp_unix_s": stamp}
    for field, column in FIELD_COLUMNS.items():
        if field in values:
            row[column] = _number(values[field])
    return row


def _unix_seconds(text: str, zone: tzinfo | None) -> float | None:
    for fmt in _TIME_FORMATS:
        try:
            naive = datetime.strptime(text, fmt)
        except ValueError:
            continue
        # a naive datetime's astimezone()/timestamp() use this machine's zone
        return naive.timestamp() if zone is None else naive.replace(tzinfo=zone).timestamp()
    return None


def _number(text: str) -> float:
    if text.lower() in _MISSING:
        return math.nan
    text = re.sub(r"\s*(MiB|%|W|MHz|C)$", "", text)
    try:
        return float(text)
    except ValueError:
        return math.nan
